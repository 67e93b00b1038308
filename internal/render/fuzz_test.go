package render

import (
	"os/exec"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// hostPathDomain reports whether s is a value the quoting helpers receive:
// valid UTF-8 (Terraform strings are) without control characters
// (checkHostPath refuses those before anything is quoted).
func hostPathDomain(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

var quotingSeeds = []string{
	"/usr/bin/openclaw", "/opt/open claw/bin/openclaw%h", "/a$b", "/a$$b", "/${HOME}", "/x%%y", "/100%",
	`/back\slash`, `/dq"uote`, "/it's", `/ends\`, `/ends\\`, "/trailing ", " /leading", "/tab\there", "/new\nline",
	"/semi;colon", "/;", "/-dash", "-/x", "@/x", "/é€😀", "/\xff", "/a=b", "/'\"'\"", `/\"`, "/#", "", "relative",
	"/x;/y", `/a\;`, "/%", "/a%", `/\x41`,
}

// FuzzExecQuote: the ExecStart= line unitText writes, with any executable
// path, reads back (in the systemd model) as that path and the arguments
// "gateway run": the word never splits, and the path is the same after
// unquoting and specifiers (systemd expands no variable in it). That holds
// for every string without control characters as the model unquotes; the
// executable is exact for every path Systemd lets through (absolute,
// cleaned, checkHostPath, no quote or backslash), and every path Systemd
// refuses for quotes or backslashes is one systemd refuses too.
func FuzzExecQuote(f *testing.F) {
	for _, s := range quotingSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !hostPathDomain(s) {
			return
		}
		st, err := oneSetting("ExecStart=" + execQuote(s) + " gateway run")
		if err != nil {
			t.Fatalf("ExecStart for %q: %v", s, err)
		}
		words, err := extractWords(st.value)
		if err != nil || len(words) != 3 || words[1].text != "gateway" || words[2].text != "run" {
			t.Fatalf("ExecStart=%s: words %q, %v", st.value, words, err)
		}
		if got, err := resolveSpecifiers(words[0].text); err != nil || got != s {
			t.Fatalf("ExecStart=%s: first word %q (%v), want %q", st.value, got, err, s)
		}
		if !path.IsAbs(s) || path.Clean(s) != s || checkHostPath(s) != nil {
			return
		}
		exe, args, err := execStart(st.value)
		refused := strings.ContainsAny(s, `"'\`)
		if refused != (err != nil) {
			t.Fatalf("ExecStart=%s: Systemd refuses %v, systemd (model) says %v", st.value, refused, err)
		}
		if !refused && (exe != s || strings.Join(args, " ") != "gateway run") {
			t.Fatalf("ExecStart=%s runs %q %q, want %q", st.value, exe, args, s)
		}
	})
}

// FuzzEnvQuote: an Environment= assignment reads back (in the systemd
// model) as exactly the one variable, for every variable name and every
// value without control characters.
func FuzzEnvQuote(f *testing.F) {
	for _, s := range quotingSeeds {
		f.Add("OPENCLAW_CONFIG_PATH", s)
	}
	f.Add("HOME", "")
	f.Add("_", "=")
	f.Add("A1", `a "b" 'c' \d %e $f`)
	f.Fuzz(func(t *testing.T, name, value string) {
		if !envName(name) || !hostPathDomain(value) {
			return
		}
		line := "Environment=" + envQuote(name, value)
		st, err := oneSetting(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		env, err := environment(st.value)
		if err != nil || len(env) != 1 || env[0].key != name || env[0].value != value {
			t.Fatalf("%s reads as %q (%v), want %s=%q", line, env, err, name, value)
		}
	})
}

// FuzzUnitEscape: a path setting systemd does not unquote
// (EnvironmentFile=, WorkingDirectory=) reads back (in the systemd model)
// as the path for every path checkHostPath accepts; and the X-OCC-Agent-Dir
// line reads back as the path through the read and delete scripts' own
// pipeline, run by a real sh and sed (sshexec's readScript).
func FuzzUnitEscape(f *testing.F) {
	for _, s := range quotingSeeds {
		f.Add(s)
	}
	_, shErr := exec.LookPath("sed")
	f.Fuzz(func(t *testing.T, s string) {
		if !hostPathDomain(s) || checkHostPath(s) != nil {
			return
		}
		for _, key := range []string{"EnvironmentFile", "WorkingDirectory"} {
			st, err := oneSetting(key + "=" + unitEscape(s))
			if err != nil {
				t.Fatalf("%s for %q: %v", key, s, err)
			}
			if got, err := resolveSpecifiers(st.value); err != nil || got != s {
				t.Fatalf("%s=%s reads as %q (%v), want %q", key, st.value, got, err, s)
			}
		}
		if shErr != nil {
			return
		}
		unit := "[Unit]\n" + UnitKeyAgentDir + "=" + unitEscape(s) + "\n" + UnitKeyAgentDir + "=/second\n"
		cmd := exec.Command("sh", "-c", `printf '%s' "$1" | sed -n 's/^X-OCC-Agent-Dir=//p' | head -n 1 | sed 's/%%/%/g'`, "sh", unit)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
		out, err := cmd.Output()
		if err != nil || strings.TrimSuffix(string(out), "\n") != s {
			t.Fatalf("the scripts read X-OCC-Agent-Dir as %q (%v), want %q", out, err, s)
		}
	})
}

// FuzzParseRevisionDirName: ParseRevisionDirName accepts exactly the names
// RevisionDirName gives positive revisions: an accepted name is the
// canonical "rN" of its number, and every "rN" of N >= 1 reads as N.
func FuzzParseRevisionDirName(f *testing.F) {
	for _, s := range []string{"r1", "r42", "r0", "r01", "rx", "1", "r-1", "r+1", "current", "", "r", "R1", "r1 ", " r1",
		"r9223372036854775807", "r9223372036854775808", "r١", "r1e3", "r0x1"} {
		f.Add(s, int64(len(s)))
	}
	f.Add("", int64(-1))
	f.Add("", int64(0))
	f.Add("", int64(1)<<62)
	f.Fuzz(func(t *testing.T, s string, n int64) {
		got, ok := ParseRevisionDirName(s)
		if ok && (got < 1 || RevisionDirName(got) != s) {
			t.Fatalf("ParseRevisionDirName(%q) = %d, true; RevisionDirName gives %q", s, got, RevisionDirName(got))
		}
		if !ok && got != 0 && strings.HasPrefix(s, "r") && got > 0 && RevisionDirName(got) == s {
			t.Fatalf("ParseRevisionDirName(%q) refused its own name", s)
		}
		back, ok := ParseRevisionDirName(RevisionDirName(n))
		if ok != (n >= 1) || ok && back != n {
			t.Fatalf("RevisionDirName(%d) = %q reads as %d, %v", n, RevisionDirName(n), back, ok)
		}
	})
}

// FuzzSystemdUnit renders a unit with fuzzed host paths and reads it back
// through the systemd model: either Systemd refuses them, or the unit
// says exactly what the SystemdHost says: ExecStart runs the openclaw
// path with "gateway run", Environment= sets the four variables to their
// values and TMPDIR, EnvironmentFile= is the credentials file,
// WorkingDirectory= the state directory, X-OCC-Agent-Dir (specifiers
// resolved, as the scripts do) the agent directory, and every setting is
// on its own line (nothing swallowed by a continuation).
func FuzzSystemdUnit(f *testing.F) {
	f.Add("/usr/bin/openclaw", "/etc/openclaw", "/etc/occ/openclaw.env")
	f.Add("/opt/open claw/bin/openclaw%h", "/srv/occ 100%", "/etc/occ/a b.env")
	f.Add("/a$b", "/c$$d", "/e${HOME}")
	f.Add("/usr/bin/openclaw", "/etc/openclaw", `/etc/occ/ends\`)
	f.Add("/usr/bin/openclaw", "/etc/openclaw", "/etc/occ/trailing ")
	f.Add("/x", `/c"d`, "/e'f")
	f.Add("/x", "/c\\", "/é€😀")
	f.Add("/x", "/c", "/etc/openclaw/support/x.env")
	base := func() *admission.Revision {
		d, err := occconfig.Parse(anthropicSSH)
		if err != nil {
			f.Fatal(err)
		}
		in := admission.Input{
			Agent:         admission.Agent{Name: "support"},
			Configuration: admission.Configuration{ID: "support", Name: "support", Generation: 2, Document: d},
			Compute:       admission.Compute{ID: "edge", Name: "edge", Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: "10.0.0.5", Port: 22, OpenClawPath: "/usr/bin/openclaw", ConfigDir: "/etc/openclaw"}},
			Source: admission.CredentialSource{ID: "host", Name: "host", Method: admission.MethodRuntime, Generation: 1, ComputeID: "edge",
				EnvironmentFile: "/etc/occ/openclaw.env"},
		}
		rev, errs := admission.Admit(in)
		if len(errs) > 0 {
			f.Fatal(errs)
		}
		return rev
	}()
	f.Fuzz(func(t *testing.T, openclaw, configDir, envFile string) {
		if !utf8.ValidString(openclaw) || !utf8.ValidString(configDir) || !utf8.ValidString(envFile) {
			return // Terraform strings are UTF-8
		}
		r := *base
		r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.OpenClawPath, s.ConfigDir = openclaw, configDir })
		r.Source.EnvironmentFile = envFile
		// An empty setting (a revision from an older state) renders the
		// schema's default, as Systemd documents.
		if openclaw == "" {
			openclaw = "/usr/bin/openclaw"
		}
		if configDir == "" {
			configDir = "/etc/openclaw"
		}
		h, err := Systemd(&r, 1)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "render: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		settings, err := unitSettings(h.UnitText)
		if err != nil {
			t.Fatalf("unit does not read: %v\n%s", err, h.UnitText)
		}
		if lines := strings.Count(strings.TrimRight(h.UnitText, "\n"), "\n") + 1; len(settings) != lines-countSkipped(h.UnitText) {
			t.Fatalf("%d settings from %d setting lines: a line was swallowed\n%s", len(settings), lines-countSkipped(h.UnitText), h.UnitText)
		}
		env := map[string]string{}
		got := map[string]string{}
		for _, st := range settings {
			switch st.key {
			case "ExecStart":
				exe, args, err := execStart(st.value)
				if err != nil || exe != path.Clean(openclaw) || strings.Join(args, " ") != "gateway run" {
					t.Fatalf("ExecStart=%s runs %q %q (%v), want %q", st.value, exe, args, err, path.Clean(openclaw))
				}
			case "Environment":
				vs, err := environment(st.value)
				if err != nil {
					t.Fatalf("Environment=%s: %v", st.value, err)
				}
				for _, v := range vs {
					env[v.key] = v.value
				}
			case "EnvironmentFile", "WorkingDirectory", UnitKeyAgentDir:
				v, err := resolveSpecifiers(st.value)
				if err != nil {
					t.Fatalf("%s=%s: %v", st.key, st.value, err)
				}
				if st.key == "EnvironmentFile" && got[st.key] != "" {
					// The second EnvironmentFile: the agent's token file.
					got["TokenFile"] = v
					continue
				}
				got[st.key] = v
			}
		}
		want := map[string]string{"OPENCLAW_CONFIG_PATH": h.ActiveConfigPath, "OPENCLAW_STATE_DIR": h.StateDir + "/state",
			"OPENCLAW_GATEWAY_PORT": "18789", "HOME": h.StateDir, "TMPDIR": "/tmp"}
		for k, v := range want {
			if env[k] != v {
				t.Fatalf("Environment %s = %q, want %q\n%s", k, env[k], v, h.UnitText)
			}
		}
		if len(env) != len(want) {
			t.Fatalf("Environment = %q", env)
		}
		if got["EnvironmentFile"] != h.EnvironmentFile || got["TokenFile"] != path.Join(h.AgentDir, GatewayTokenFile) || got["WorkingDirectory"] != h.StateDir || got[UnitKeyAgentDir] != h.AgentDir {
			t.Fatalf("paths read back as %q; host %+v", got, h)
		}
		if h.EnvironmentFile != path.Clean(envFile) || h.AgentDir != path.Join(configDir, "support") {
			t.Fatalf("SystemdHost paths %q %q", h.EnvironmentFile, h.AgentDir)
		}
	})
}

// countSkipped counts the lines unitSettings passes over: empty lines,
// comments and sections.
func countSkipped(text string) int {
	n := 0
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l = strings.TrimSpace(l); l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' {
			n++
		}
	}
	return n
}
