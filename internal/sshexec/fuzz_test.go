package sshexec

import (
	"bytes"
	"encoding/json"
	"net"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// FuzzParseJournal feeds `journalctl -o json` output to ParseJournal.
// Properties: no panic; at most one entry per line; no entry before since;
// every text is valid UTF-8 (diagnostics travel in protobuf strings, which
// must be); a record in which systemd quotes the credentials file
// (CODE_FUNC invalid_env, or "environment assignment" and a quote) is
// withheld, and a withheld one holds the fixed text only (AU5, AU7);
// Line renders one line of bounded length; StartupRecords passes over
// withheld entries and never panics.
func FuzzParseJournal(f *testing.F) {
	f.Add(journalOut, int64(1795952145300000))
	f.Add(journalOut, int64(0))
	for _, seed := range []string{
		``,
		"\n\n",
		`{"MESSAGE":"` + strings.Repeat("é", 400) + `"}`,
		`{"MESSAGE":"` + strings.Repeat("x", 599) + `€"}`,
		`{"MESSAGE":[104,105,255,-1,256,1000]}`,
		`{"MESSAGE":"{\"level\":\"info\",\"subsystem\":\"gw\",\"message\":\"a\\nb\\n\\n c\"}"}`,
		`{"MESSAGE":"x: Ignoring invalid environment assignment 'K=sk-x': /etc/occ/x.env"}`,
		`{"CODE_FUNC":"invalid_env","MESSAGE":"anything sk-x"}`,
		`{"CODE_FUNC":[105,110,118,97,108,105,100,95,101,110,118],"MESSAGE":"bytes sk-x"}`,
		`{"MESSAGE":"environment assignment 'x'"}`,
		`{"__REALTIME_TIMESTAMP":"-1","MESSAGE":"m"}`,
		`{"__REALTIME_TIMESTAMP":"9223372036854775807","MESSAGE":"m"}`,
		`{"__REALTIME_TIMESTAMP":1795952145000000,"PRIORITY":6,"MESSAGE":null}`,
		`{"MESSAGE":"{\"event\":\"codex.model_probe\",\"code\":\"MODEL_PROBE_FAILED\",\"causeDetail\":\"sk-secret\"}"}`,
		`{"MESSAGE":"{\"event\":\"openclaw.model_probe\",\"code\":\"AUTHENTICATION_FAILED\",\"final\":true}"}`,
		"[1,2]\n{}\nnull\n\"x\"",
		"{\"MESSAGE\":\"\xff\xfe\"}",
	} {
		f.Add(seed, int64(0))
	}
	f.Fuzz(func(t *testing.T, out string, sinceMicro int64) {
		var since time.Time
		if sinceMicro != 0 {
			since = time.UnixMicro(sinceMicro).UTC()
		}
		entries := ParseJournal(out, since)
		if n := strings.Count(out, "\n") + 1; len(entries) > n {
			t.Fatalf("%d entries from %d lines", len(entries), n)
		}
		for _, e := range entries {
			if !since.IsZero() && !e.Time.IsZero() && e.Time.Before(since) {
				t.Fatalf("entry at %v is before %v", e.Time, since)
			}
			if !utf8.ValidString(e.Message) || !utf8.ValidString(e.Identifier) {
				t.Fatalf("invalid UTF-8 in %+v", e)
			}
			if e.Withheld != (e.Message == withheldMessage) {
				t.Fatalf("withheld %v, message %q", e.Withheld, e.Message)
			}
			if !e.Withheld && (strings.Contains(e.Message, "invalid environment assignment") ||
				strings.Contains(e.Message, "environment assignment") && strings.Contains(e.Message, "'")) {
				t.Fatalf("a quote of the credentials file is not withheld: %q", e.Message)
			}
			l := e.Line()
			if !utf8.ValidString(l) || strings.Contains(l, "\n") || len(l) > len("15:04:05.000 ")+600+len("…") {
				t.Fatalf("Line() = %q", l)
			}
		}
		// Every line systemd marked invalid_env is withheld, however spelled.
		for _, line := range strings.Split(out, "\n") {
			var raw map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &raw) != nil || journalString(raw["CODE_FUNC"]) != "invalid_env" {
				continue
			}
			msg := journalString(raw["MESSAGE"])
			for _, e := range entries {
				if !e.Withheld && e.Message == msg && msg != "" {
					t.Fatalf("invalid_env record %q not withheld", msg)
				}
			}
		}
		if lines := JournalLines(entries, 3); len(lines) > 3 {
			t.Fatalf("JournalLines kept %d", len(lines))
		}
		records, bad := StartupRecords(entries)
		if bad != nil && len(bad.Error()) > 200 {
			t.Fatalf("record error is %d bytes", len(bad.Error()))
		}
		if len(records) > len(entries) {
			t.Fatalf("%d records from %d entries", len(records), len(entries))
		}
	})
}

// FuzzParseUnitState: any `systemctl show` output parses without panic;
// a state written as systemctl writes it (KEY=value lines of the
// properties in unitProperties) parses back to the same state.
func FuzzParseUnitState(f *testing.F) {
	f.Add("loaded", "active", "running", "success", 1, 0, 0, "0123456789abcdef0123456789abcdef", "")
	f.Add("not-found", "inactive", "dead", "", 0, 0, 0, "", "garbage\n=\nLoadState")
	f.Add("loaded", "activating", "auto-restart", "exit-code", 1, 78, 3, "", "NRestarts=x\r\nExecMainCode=-1")
	f.Add("a=b", "", "", "", -5, 1<<40, -1, "x", "\x00=\x00")
	f.Fuzz(func(t *testing.T, load, active, sub, result string, code, status, restarts int, inv, noise string) {
		s := ParseUnitState(noise)
		_, _ = s.String(), s.Failed()
		if s.ActiveState == "failed" && !s.Failed() {
			t.Fatalf("failed unit not Failed: %+v", s)
		}
		want := UnitState{LoadState: load, ActiveState: active, SubState: sub, Result: result,
			ExecMainCode: code, ExecMainStatus: status, NRestarts: restarts, InvocationID: inv}
		for _, v := range []string{load, active, sub, result, inv} {
			// systemctl show prints one line per property, and the parser
			// trims lines: values are single-line and trimmed.
			if strings.ContainsAny(v, "\n\r") || strings.TrimSpace(v) != v {
				return
			}
		}
		var b strings.Builder
		values := map[string]string{
			"LoadState": load, "ActiveState": active, "SubState": sub, "Result": result,
			"ExecMainCode": strconv.Itoa(code), "ExecMainStatus": strconv.Itoa(status), "NRestarts": strconv.Itoa(restarts), "InvocationID": inv,
		}
		for _, p := range strings.Split(unitProperties, ",") {
			v, ok := values[p]
			if !ok {
				t.Fatalf("unitProperties names %s, which ParseUnitState does not read", p)
			}
			b.WriteString(p + "=" + v + "\n")
		}
		if got := ParseUnitState(noise + "\n" + b.String()); got != want {
			t.Fatalf("ParseUnitState(%q) = %+v, want %+v", b.String(), got, want)
		}
	})
}

// FuzzParseObserved feeds the read script's output to parseObserved.
// Properties: no panic; revisions ascending and positive; Drift is set
// exactly when Reason is; an agent that is not there has no drift; no
// drift means the activated revision runs unchanged (unit file present,
// unit active, current link on the activated revision, digest equal); the
// texts are valid UTF-8 when the output is.
func FuzzParseObserved(f *testing.F) {
	act := `{"agent":"support","revision":3,"revision_id":"abc","digest":"d1","activated_at":"2026-11-29T10:00:00Z","endpoint":"http://127.0.0.1:18789"}`
	for _, seed := range []string{
		"",
		"unit_file=absent\nagent_dir=\n",
		"unit_file=present\nLoadState=loaded\nActiveState=active\nSubState=running\nagent_dir=/etc/openclaw/support\ncurrent=r3\ndigest=d1\nactivation=" + act + "\nrevisions=r1 r2 r3 \n",
		"unit_file=present\nLoadState=loaded\nActiveState=active\nagent_dir=/x\ncurrent=r3\ndigest=d2\nactivation=" + act + "\nrevisions=r3 r10 r2 r02 rx r0 r-1 r9223372036854775808\n",
		"unit_file=present\nLoadState=not-found\ncurrent=r1\n",
		"unit_file=present\nLoadState=loaded\nActiveState=failed\nResult=exit-code\nExecMainCode=1\nExecMainStatus=203\nNRestarts=2\n",
		"unit_file=present\nActiveState=active\ncurrent=r4\nactivation=" + act + "\n",
		"unit_file=present\nActiveState=active\ncurrent=r3\nactivation={\"revision\":\"x\"}\n",
		"unit_file=present\nActiveState=active\ncurrent=r3\nactivation=" + act + "\ndigest=\n",
		"current=current\nrevisions=current r1\n",
		"unit_file=present\nActiveState=active\ncurrent=r3\ndigest=\xff\xfe" + strings.Repeat("é", 20) + "\nactivation=" + act + "\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, out string) {
		o := parseObserved(out)
		if !slices.IsSorted(o.Revisions) {
			t.Fatalf("revisions not ascending: %v", o.Revisions)
		}
		for _, r := range o.Revisions {
			if r < 1 || render.RevisionDirName(r) == "" {
				t.Fatalf("revision %d", r)
			}
		}
		if o.Current < 0 {
			t.Fatalf("current %d", o.Current)
		}
		if (o.Reason == executor.DriftNone) != (o.Drift == "") {
			t.Fatalf("reason %q, drift %q", o.Reason, o.Drift)
		}
		if !o.Exists && o.Reason != executor.DriftNone {
			t.Fatalf("absent agent drifts: %q", o.Drift)
		}
		if o.Exists && o.Reason == executor.DriftNone {
			if !o.UnitFile || o.Unit.ActiveState != "active" || o.Unit.LoadState == "not-found" || o.Activation == nil ||
				o.Activation.Revision != o.Current || o.Current < 1 || o.Digest == "" || o.Digest != o.Activation.Digest {
				t.Fatalf("no drift reported for %+v (activation %+v)", o, o.Activation)
			}
		}
		if utf8.ValidString(out) && !utf8.ValidString(o.Drift) {
			t.Fatalf("drift %q is not valid UTF-8", o.Drift)
		}
	})
}

// FuzzParseListed feeds listScript's output, as a host might forge it,
// to parseListed. Properties: no panic; every name is a DNS label, the
// names ascend strictly (each agent once, in name order), and each opens a
// section with the marker in the output; each agent's view is what
// parseObserved reads of its section; no marker in the output, or none
// given, lists nothing.
func FuzzParseListed(f *testing.F) {
	const marker = "occ-list-M"
	act := `{"agent":"alpha","revision":1,"revision_id":"a1","digest":"d1","activated_at":"2026-11-29T10:00:00Z","endpoint":"http://127.0.0.1:18789"}`
	body := "unit_file=present\nLoadState=loaded\nActiveState=active\nagent_dir=/etc/openclaw/alpha\ncurrent=r1\ndigest=d1\nactivation=" + act + "\nrevisions=r1 \n"
	for _, seed := range []string{
		"",
		"\n",
		marker + " alpha\n" + body + marker + " beta\nunit_file=present\n",
		marker + " beta\n" + body + marker + " alpha\n" + body,
		marker + " alpha\n" + body + marker + " alpha\ncurrent=r9\n",
		marker + " Bad_Name\n" + body + marker + " 9lives\n" + marker + " a-\n" + marker + " \n" + marker + "\n",
		marker + " alpha\ncurrent=\n" + marker + " x" + strings.Repeat("y", 63) + "\n",
		"occ-list-other alpha\n" + body,
		marker + "alpha\n" + body,
		"noise\n" + marker + " alpha\r\n" + body + " " + marker + " beta\n",
		marker + " alpha",
		marker + " \xff\xfe\n" + body,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, out string) {
		if got := parseListed(out, ""); got != nil {
			t.Fatalf("no marker given, listed %+v", got)
		}
		agents := parseListed(out, marker)
		if !strings.Contains(out, marker+" ") && len(agents) > 0 {
			t.Fatalf("no marker in the output, listed %+v", agents)
		}
		for i, a := range agents {
			if len(a.Name) > 63 || !dnsLabel(a.Name) {
				t.Fatalf("listed %q, no DNS label", a.Name)
			}
			if i > 0 && agents[i-1].Name >= a.Name {
				t.Fatalf("names %q then %q", agents[i-1].Name, a.Name)
			}
			// The agent's first section: from its marker line to the next
			// marker line or the end.
			full, open := "\n"+out, "\n"+marker+" "+a.Name
			start := strings.Index(full, open+"\n")
			if start < 0 && strings.HasSuffix(full, open) {
				start = len(full) - len(open)
			}
			if start < 0 {
				t.Fatalf("%q opens no section of %q", a.Name, out)
			}
			section := strings.TrimPrefix(full[start+len(open):], "\n")
			if end := strings.Index("\n"+section, "\n"+marker+" "); end >= 0 {
				section = section[:max(end-1, 0)]
			}
			if want := parseObserved(section); !reflect.DeepEqual(a.View, want) {
				t.Fatalf("agent %q: view %+v, want %+v of its section %q", a.Name, a.View, want, section)
			}
		}
	})
}

// FuzzParseImportID: a parsed SSH import id has a host without "/", "@"
// or a space, a port of 0 (the default) or 1..65535 and a non-empty name
// without "/"; written back as ssh://HOST[:PORT]/NAME it parses to the
// same; AgentID's HOST/NAME form parses to the same host and name when the
// host holds a dot or is an IPv6 address; the host and port make a dialable address
// (Target.Addr splits back into them). ParseImportID accepts only names
// that are DNS labels.
func FuzzParseImportID(f *testing.F) {
	for _, seed := range []string{
		"10.0.0.5/support", "127.0.0.1:2222/support", "edge.example.com/support", "ssh://edge/support",
		"ssh://edge:22/support", "[::1]:2222/support", "[fe80::1]/support", "occ-acme/support", "10.0.0.5/",
		"/support", "127.0.0.1:99999/support", "user@10.0.0.5/support", "support", "ssh:///x", "ssh://a:0/x",
		"::1/x", "a:b/x", "[a:b]/x", "[:]:22/x", "[a/x", "a]/x", "ssh://[::1]:/x", "a.b/c/d", "ssh://ssh://a/b",
		"fe80::1%eth0/x", "[fe80::1%25eth0]:22/x", "a.b:+22/x", "a.b:022/x", "a.b: 22/x", "ssh://h/UPPER",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		host, port, name, ok := parseImportID(id)
		e := &Executor{}
		n, eok, err := e.ParseImportID(id)
		if eok != ok || ok && err == nil && n != name || !ok && (n != "" || err != nil) {
			t.Fatalf("ParseImportID(%q) = %q %v %v; parseImportID says %q %v", id, n, eok, err, name, ok)
		}
		if err == nil && ok && (len(name) > 63 || !dnsLabel(name)) {
			t.Fatalf("ParseImportID(%q) accepted name %q", id, name)
		}
		if !ok {
			if host != "" || port != 0 || name != "" {
				t.Fatalf("refused id %q returned %q %d %q", id, host, port, name)
			}
			return
		}
		if host == "" || strings.ContainsAny(host, "/@ ") || port < 0 || port > 65535 || name == "" || strings.Contains(name, "/") {
			t.Fatalf("parseImportID(%q) = %q %d %q", id, host, port, name)
		}
		hostPort := host
		if port != 0 {
			hostPort = net.JoinHostPort(host, strconv.Itoa(port))
		} else if strings.Contains(host, ":") {
			hostPort = "[" + host + "]"
		}
		h2, p2, n2, ok2 := parseImportID("ssh://" + hostPort + "/" + name)
		if !ok2 || h2 != host || p2 != port || n2 != name {
			t.Fatalf("ssh://%s/%s (from %q) parses to %q %d %q %v", hostPort, name, id, h2, p2, n2, ok2)
		}
		// HOST/NAME reads a host with one colon as HOST:PORT; such a host
		// is no IPv6 address (those have two colons or more).
		if colons := strings.Count(host, ":"); colons != 1 && (colons > 1 || strings.Contains(host, ".")) {
			aid := AgentID(admission.Compute{Settings: admission.SSHCompute{Host: host}}, name)
			if h3, p3, n3, ok3 := parseImportID(aid); !ok3 || h3 != host || p3 != 0 || n3 != name {
				t.Fatalf("AgentID %q (from %q) parses to %q %d %q %v", aid, id, h3, p3, n3, ok3)
			}
		}
		addr := Target{Host: host, Port: port}.Addr()
		ah, ap, err := net.SplitHostPort(addr)
		wantPort := port
		if wantPort == 0 {
			wantPort = 22
		}
		if err != nil || ah != host || ap != strconv.Itoa(wantPort) {
			t.Fatalf("Addr() = %q for %q %d (%v)", addr, host, port, err)
		}
	})
}

func dnsLabel(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z') || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// FuzzShQuote: a quoted word reaches the command as it was, through a real
// POSIX shell (dash as /bin/sh here, and bash when present: the SSH
// server runs the command line with the login shell), both alone and as
// an argument of the command line Conn.command builds (sudo left out).
// Strings with NUL bytes are skipped: argv cannot hold them.
func FuzzShQuote(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "with space", "it's", "'", "''", `'\''`, `"$HOME"`, "$(id)", "`id`", "a\nb", "\t\r\n",
		"-n", "--", "*", "~", "!", "a;b|c&d", "\\", `\'`, "\xff\xfe", "é€😀", "%s%d", "${IFS}", "'$'\\n''",
	} {
		f.Add(seed)
	}
	shells := []string{"sh"}
	if _, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, "bash")
	}
	root := &Conn{target: Target{User: "root"}}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			t.Skip("argv cannot hold a NUL byte")
		}
		for _, sh := range shells {
			for _, line := range []string{
				"printf %s " + shQuote(s),
				root.command(`printf %s "$1"`, []string{s}),
			} {
				cmd := exec.Command(sh, "-c", line)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil || string(out) != s {
					t.Fatalf("%s -c %q printed %q, want %q (%v, %s)", sh, line, out, s, err, stderr.String())
				}
			}
		}
	})
}

// FuzzParseSelected: guardScript's output (the host's text) never panics
// the parser, and what it reads is a revision number or none.
func FuzzParseSelected(f *testing.F) {
	act := `{"agent":"support","revision":3,"revision_id":"abc","digest":"d1","activated_at":"2026-11-29T10:00:00Z","endpoint":"http://127.0.0.1:18789"}`
	for _, seed := range []string{
		"",
		"current=\nunit_dir=\n",
		"current=r3\nactivation=" + act + "\nunit_dir=/etc/openclaw/support\n",
		"current=\nunit_dir=/srv/a/support\nunit_current=r3\nunit_activation=" + act + "\n",
		"current=r9223372036854775808\nunit_current=rx\nunit_activation={\n",
		"unit_dir==\nunit_current==r1\n\xff\xfe",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, out string) {
		sel := parseSelected(out)
		for _, s := range []*selected{&sel, sel.Unit} {
			if s == nil {
				continue
			}
			if s.Revision < 0 || (s.Revision > 0 && render.RevisionDirName(s.Revision) == "") {
				t.Fatalf("revision %d", s.Revision)
			}
			if s.Activation != nil && s.Activation.RevisionID == "" {
				t.Fatalf("an activation without a revision id: %+v", s.Activation)
			}
		}
		if sel.Unit != nil && sel.Unit.Unit != nil {
			t.Fatal("a unit's selection nests another")
		}
	})
}
