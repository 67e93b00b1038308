package render

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// An independent model of how systemd 252 reads the settings of a unit
// file that unitText writes, for checking execQuote, envQuote and
// unitEscape (systemd.syntax(7) "Quoting", systemd.service(5) "Command
// lines", systemd.exec(5) Environment=, systemd.unit(5) "Specifiers"). It
// follows systemd's sources where the manuals are silent (conf-parser.c,
// extract-word.c, escape.c, load-fragment.c). The subset modelled:
//
//   - unitSettings, the lines (conf-parser.c): a line that ends in an odd
//     number of backslashes continues on the next, that backslash read as a
//     space; lines are stripped of white space (" \t\n\r"); empty lines,
//     comments (# or ; first) and [section] lines are skipped; a setting is
//     KEY=VALUE cut at the first "=", both sides stripped; a setting that is
//     not valid UTF-8 is ignored by systemd, an error here.
//   - extractWords, extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE),
//     as ExecStart= and Environment= call it: words split at white space;
//     '…' and "…" quote, also in mid-word (a"b c"d is one word); the
//     backslash escapes in and out of quotes, C-style (\a \b \f \n \r \t \v
//     \\ \" \' \s, \xHH, \NNN octal, \uHHHH, \UHHHHHHHH; none may give NUL);
//     an unknown escape or an unbalanced quote is an error (systemd warns
//     and retries relaxed, or ignores the setting).
//   - resolveSpecifiers, "%%" is "%"; any other specifier (which would
//     expand to something) or a lone "%" is an error here, since a quoted
//     value must hold none.
//   - execStart, ExecStart= (load-fragment.c config_parse_exec): the
//     prefixes "-@:+!" are consumed from the unquoted first word; the rest,
//     specifiers resolved, is the executable, which must be absolute and
//     "safe" (string_is_safe: no control character, quote or backslash);
//     no variable is expanded in it. A raw word ";" separates commands and
//     "\;" is a literal ";". In the arguments "$$" is "$" and "${…}" or a
//     word "$NAME" a variable (an error here: the arguments unitText writes
//     hold none).
//   - environment, Environment=: each word, unquoted and specifiers
//     resolved, is NAME=VALUE with NAME a valid variable name
//     ([A-Za-z_][A-Za-z0-9_]*); anything else is ignored by systemd, an
//     error here.
//
// Not modelled: LONG_LINE_MAX, the relaxed retries, "@" argv[0] beyond
// taking the next word, variable expansion in arguments, path
// simplification of the executable (Systemd writes a cleaned path).

type setting struct{ key, value string }

// unitSettings reads the settings of a unit file's text, in order.
func unitSettings(text string) ([]setting, error) {
	var out []setting
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		// A continuation: the last backslash of an odd run becomes a space.
		for oddBackslashes(l) && i+1 < len(lines) {
			i++
			l = l[:len(l)-1] + " " + lines[i]
		}
		l = strings.Trim(l, " \t\n\r")
		if l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("line %q is not KEY=VALUE", l)
		}
		if !utf8.ValidString(l) {
			return nil, fmt.Errorf("line %q is not UTF-8", l)
		}
		out = append(out, setting{strings.Trim(k, " \t\n\r"), strings.Trim(v, " \t\n\r")})
	}
	return out, nil
}

func oddBackslashes(l string) bool {
	n := 0
	for n < len(l) && l[len(l)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// word is one extracted word and its raw text.
type word struct{ text, raw string }

const separators = " \t\n\r"

// extractWords splits a value into words, unquoting and unescaping them.
func extractWords(s string) ([]word, error) {
	var words []word
	i := 0
	for {
		for i < len(s) && strings.IndexByte(separators, s[i]) >= 0 {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		start := i
		// "\;" is a literal ";" word (config_parse_exec checks it first).
		if strings.HasPrefix(s[i:], `\;`) && (i+2 == len(s) || strings.IndexByte(separators, s[i+2]) >= 0) {
			words = append(words, word{";", `\;`})
			i += 2
			continue
		}
		var w []byte
		var quote byte
		for i < len(s) {
			c := s[i]
			if c == '\\' {
				n, b, err := cunescapeOne(s[i+1:])
				if err != nil {
					return nil, fmt.Errorf("at %q: %w", s[i:], err)
				}
				w = append(w, b...)
				i += 1 + n
				continue
			}
			if quote != 0 {
				if c == quote {
					quote = 0
				} else {
					w = append(w, c)
				}
				i++
				continue
			}
			if c == '\'' || c == '"' {
				quote = c
				i++
				continue
			}
			if strings.IndexByte(separators, c) >= 0 {
				break
			}
			w = append(w, c)
			i++
		}
		if quote != 0 {
			return nil, errors.New("unbalanced quoting")
		}
		words = append(words, word{string(w), s[start:i]})
	}
}

// cunescapeOne reads the escape after a backslash: how many bytes it takes
// and what it gives.
func cunescapeOne(p string) (int, []byte, error) {
	if p == "" {
		return 0, nil, errors.New("a backslash ends the value")
	}
	if i := strings.IndexByte(`abfnrtv\"'s`, p[0]); i >= 0 {
		return 1, []byte{"\a\b\f\n\r\t\v\\\"' "[i]}, nil
	}
	hex := func(s string, n int) (uint64, bool) {
		if len(s) < n {
			return 0, false
		}
		v, err := strconv.ParseUint(s[:n], 16, 32)
		return v, err == nil && !strings.ContainsAny(s[:n], "+-")
	}
	switch c := p[0]; {
	case c == 'x':
		v, ok := hex(p[1:], 2)
		if !ok || v == 0 {
			return 0, nil, fmt.Errorf("bad \\x escape")
		}
		return 3, []byte{byte(v)}, nil
	case c == 'u' || c == 'U':
		n := map[byte]int{'u': 4, 'U': 8}[c]
		v, ok := hex(p[1:], n)
		if !ok || v == 0 || v > utf8.MaxRune || v >= 0xd800 && v <= 0xdfff {
			return 0, nil, fmt.Errorf("bad \\%c escape", c)
		}
		return 1 + n, utf8.AppendRune(nil, rune(v)), nil
	case c >= '0' && c <= '7':
		if len(p) < 3 || strings.IndexFunc(p[:3], func(r rune) bool { return r < '0' || r > '7' }) >= 0 {
			return 0, nil, errors.New("bad octal escape")
		}
		v, _ := strconv.ParseUint(p[:3], 8, 16)
		if v == 0 || v > 255 {
			return 0, nil, errors.New("bad octal escape")
		}
		return 3, []byte{byte(v)}, nil
	}
	return 0, nil, fmt.Errorf("unknown escape \\%c", p[0])
}

// resolveSpecifiers resolves "%%"; any other specifier is an error.
func resolveSpecifiers(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return "", fmt.Errorf("specifier at %q", s[i:])
	}
	return b.String(), nil
}

// stringIsSafe is systemd's string_is_safe.
func stringIsSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
}

// execStart reads an ExecStart= value: the executable and the arguments.
func execStart(v string) (exe string, args []string, err error) {
	words, err := extractWords(v)
	if err != nil {
		return "", nil, err
	}
	if len(words) == 0 {
		return "", nil, errors.New("no command")
	}
	first := words[0].text
	argv0 := false
	for first != "" && strings.IndexByte("-@:+!", first[0]) >= 0 {
		argv0 = argv0 || first[0] == '@'
		first = first[1:]
	}
	if exe, err = resolveSpecifiers(first); err != nil {
		return "", nil, err
	}
	if !path.IsAbs(exe) || !stringIsSafe(exe) {
		return "", nil, fmt.Errorf("executable %q is refused", exe)
	}
	rest := words[1:]
	if argv0 {
		if len(rest) == 0 {
			return "", nil, errors.New("@ without argv[0]")
		}
		rest = rest[1:]
	}
	for _, w := range rest {
		switch {
		case w.raw == ";":
			return "", nil, errors.New("a second command")
		case w.raw == `\;`:
			w.text = ";"
		}
		a, err := resolveSpecifiers(w.text)
		if err != nil {
			return "", nil, err
		}
		if strings.Contains(a, "$") {
			return "", nil, fmt.Errorf("argument %q holds a variable or $$", a)
		}
		args = append(args, a)
	}
	return exe, args, nil
}

// environment reads an Environment= value.
func environment(v string) ([]setting, error) {
	words, err := extractWords(v)
	if err != nil {
		return nil, err
	}
	var out []setting
	for _, w := range words {
		a, err := resolveSpecifiers(w.text)
		if err != nil {
			return nil, err
		}
		name, value, ok := strings.Cut(a, "=")
		if !ok || !envName(name) || !utf8.ValidString(value) {
			return nil, fmt.Errorf("invalid environment assignment %q", a)
		}
		out = append(out, setting{name, value})
	}
	return out, nil
}

func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// oneSetting reads a single KEY=VALUE line through unitSettings, followed
// by another line, which must stay its own setting (no continuation).
func oneSetting(line string) (setting, error) {
	s, err := unitSettings(line + "\nNext=1\n")
	if err != nil {
		return setting{}, err
	}
	if len(s) != 2 || s[1] != (setting{"Next", "1"}) {
		return setting{}, fmt.Errorf("%q reads as %q: the next line was swallowed", line, s)
	}
	return s[0], nil
}

// TestSystemdModel pins the model to what systemd 252 was seen to do
// (systemd-analyze verify on this kind of line) and to its manuals.
func TestSystemdModel(t *testing.T) {
	cmds := []struct {
		value string
		exe   string
		args  []string
		fails bool
	}{
		{`/usr/bin/openclaw gateway run`, "/usr/bin/openclaw", []string{"gateway", "run"}, false},
		{`"/opt/open claw/x%%h" a`, "/opt/open claw/x%h", []string{"a"}, false},
		{`/a$b`, "/a$b", nil, false},   // no variable expansion in the executable
		{`/a$$b`, "/a$$b", nil, false}, // so "$$" names another file
		{`/a"b c"d e`, "/ab cd", []string{"e"}, false},
		{`-/x`, "/x", nil, false},
		{`@/x argv0 a`, "/x", []string{"a"}, false},
		{`/x\\y`, "", nil, true}, // systemd: "Executable name contains special characters"
		{`"/x'y"`, "", nil, true},
		{`/x "unbalanced`, "", nil, true},
		{`/x ; /y`, "", nil, true},
		{`/x \; "a\x41\101\u00e9\s"`, "/x", []string{";", "aAAé "}, false},
		{`/x %h`, "", nil, true},
		{`/x \q`, "", nil, true},
		{`/x \x00`, "", nil, true},
	}
	for _, tc := range cmds {
		exe, args, err := execStart(tc.value)
		if (err != nil) != tc.fails || !tc.fails && (exe != tc.exe || strings.Join(args, "\x00") != strings.Join(tc.args, "\x00")) {
			t.Errorf("execStart(%s) = %q %q %v", tc.value, exe, args, err)
		}
	}
	for text, want := range map[string][]setting{
		"[Service]\n# c\n; c\n  A = b  \n":           {{"A", "b"}},
		"A=x\\\nB=y":                                 {{"A", "x B=y"}},
		"A=x\\\\\nB=y":                               {{"A", `x\\`}, {"B", "y"}},
		"Environment=\"A=b c\" B=\\\"x \"C=\\\\\"\n": {{"Environment", `"A=b c" B=\"x "C=\\"`}},
	} {
		got, err := unitSettings(text)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("unitSettings(%q) = %v %v, want %v", text, got, err, want)
		}
	}
	if env, err := environment(`"A=b c" B=\"x "C=\\" D=it's`); err == nil {
		t.Errorf("unbalanced single quote accepted: %v", env)
	}
	if env, err := environment(`"A=b c" B=\"x "C=\\" "D=it's"`); err != nil || fmt.Sprint(env) != fmt.Sprint([]setting{{"A", "b c"}, {"B", `"x`}, {"C", `\`}, {"D", "it's"}}) {
		t.Errorf("environment = %v %v", env, err)
	}
	for _, bad := range []string{`1A=x`, `A`, `A=%z`, `=x`} {
		if _, err := environment(bad); err == nil {
			t.Errorf("environment(%s) accepted", bad)
		}
	}
}

// hostilePaths are executables and directories that quoting must carry
// through systemd unchanged. Each is a file name under a test directory.
var hostilePaths = []string{
	"plain", "with space", "two  spaces", "dollar$x", "${HOME}", "$$", "$", "percent%h", "%%", "100%",
	"semi;colon", ";", "hash#x", "#", "-dash", "@at", "!bang", "+plus", ":colon", "é€😀", "a=b",
	"trailing space ", " leading space", "{}[]()<>|&*?~",
}

// refusedPaths are executables systemd refuses; Systemd must refuse them too.
var refusedPaths = []string{`back\slash`, `dq"uote`, "it's", "ends\\", "del\x7f"}

// TestSystemdQuoting_RealParser writes units whose executables, quoted by
// execQuote, have hostile names, and has systemd-analyze verify load them:
// it finds the executable only where quoting carried the name through. The
// whole unit Systemd renders is verified the same way (its other settings
// through envQuote and unitEscape). Names systemd refuses are refused by
// Systemd before, with the attribute named.
func TestSystemdQuoting_RealParser(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the quoting is checked against the model only (FuzzExecQuote, FuzzSystemdUnit)")
	}
	base := admit(t, sshInput(t, anthropicSSH))
	dir := t.TempDir()
	verify := func(t *testing.T, unitText string) string {
		t.Helper()
		unitDir := t.TempDir()
		unit := filepath.Join(unitDir, "occ-agent-support.service")
		if err := os.WriteFile(unit, []byte(unitText), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", "--generators=no", unit).CombinedOutput()
		if err != nil && len(out) == 0 {
			return err.Error()
		}
		return string(out)
	}
	for i, name := range hostilePaths {
		caseDir := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(caseDir, 0o755); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(caseDir, name)
		if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			unit := "[Unit]\nDescription=quoting\n[Service]\nExecStart=" + execQuote(exe) + " gateway run\n" +
				"Environment=" + envQuote("OCC_PATH", exe) + "\n" +
				"EnvironmentFile=-" + unitEscape(exe+".env") + "\n"
			if out := verify(t, unit); out != "" {
				t.Errorf("systemd-analyze verify of\n%s\nsays: %s", unit, out)
			}
			if checkHostPath(exe) != nil {
				return // a trailing space: refused (systemd strips it from EnvironmentFile=)
			}
			// The unit as Systemd renders it, with the hostile name in
			// openclaw_path, config_dir and environment_file.
			r := *base
			r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.OpenClawPath = exe })
			r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.ConfigDir = exe + "-config" })
			r.Source.EnvironmentFile = exe + ".env"
			h, err := Systemd(&r, 1)
			if err != nil {
				t.Fatalf("Systemd refused openclaw_path %q: %v", exe, err)
			}
			// systemd-analyze verify checks User=; the service user does
			// not exist here.
			text := strings.NewReplacer("User="+h.User+"\n", "", "Group="+h.User+"\n", "").Replace(h.UnitText)
			if out := verify(t, text); out != "" {
				t.Errorf("systemd-analyze verify of the rendered unit\n%s\nsays: %s", text, out)
			}
		})
	}
	for i, name := range refusedPaths {
		caseDir := filepath.Join(dir, "refused", strconv.Itoa(i))
		if err := os.MkdirAll(caseDir, 0o755); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(caseDir, name)
		if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Run("refused "+name, func(t *testing.T) {
			r := *base
			r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.OpenClawPath = exe })
			if _, err := Systemd(&r, 1); err == nil || !strings.Contains(err.Error(), "openclaw_path") {
				t.Errorf("Systemd accepted openclaw_path %q (err %v)", exe, err)
			}
			unit := "[Unit]\nDescription=quoting\n[Service]\nExecStart=" + execQuote(exe) + " gateway run\n"
			if out := verify(t, unit); out == "" {
				t.Errorf("systemd accepted executable %q: Systemd refuses more than it must", exe)
			}
		})
	}
}
