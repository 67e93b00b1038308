package sshexec

import (
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

const sentinel = "sk-SENTINEL-4b1d-do-not-leak"

// Recorded from systemd 252 on the test host (trimmed).
var journalOut = strings.Join([]string{
	`{"__REALTIME_TIMESTAMP":"1795952145000000","SYSLOG_IDENTIFIER":"systemd","PRIORITY":"6","MESSAGE":"Stopped occ-agent-support.service - earlier activation."}`,
	`{"__REALTIME_TIMESTAMP":"1795952145358178","SYSLOG_IDENTIFIER":"systemd","PRIORITY":"3","CODE_FUNC":"invalid_env","MESSAGE":"occ-agent-support.service: Ignoring invalid environment assignment 'bad-name=` + sentinel + `': /etc/occ/openclaw.env"}`,
	`{"__REALTIME_TIMESTAMP":"1795952145400000","SYSLOG_IDENTIFIER":"systemd","PRIORITY":"6","MESSAGE":"Started occ-agent-support.service - OCC agent support."}`,
	`not json at all`,
	`{"__REALTIME_TIMESTAMP":"1795952151022000","SYSLOG_IDENTIFIER":"openclaw","PRIORITY":"6","MESSAGE":"{\"time\":\"2026-11-29T11:33:31.022+00:00\",\"level\":\"error\",\"message\":\"Gateway failed to start: Invalid config at /etc/openclaw/support/current/openclaw.json:\\nsession: Unrecognized key: \\\"bogusKey\\\"\\nRun \\\"openclaw doctor --fix\\\" to repair, then retry.\"}"}`,
	`{"__REALTIME_TIMESTAMP":"1795952151100000","SYSLOG_IDENTIFIER":"openclaw","PRIORITY":"6","MESSAGE":[104,105,255]}`,
	`{"__REALTIME_TIMESTAMP":"1795952151200000","SYSLOG_IDENTIFIER":"systemd","PRIORITY":"5","MESSAGE":"occ-agent-support.service: Main process exited, code=exited, status=78/CONFIG"}`,
}, "\n")

// TestAU7_JournalWithholdsCredentialsFileLines: systemd quotes a malformed
// line of the EnvironmentFile in the journal; that text never reaches a
// diagnostic (AU5, AU7).
func TestAU7_JournalWithholdsCredentialsFileLines(t *testing.T) {
	since := time.UnixMicro(1795952145300000)
	entries := ParseJournal(journalOut, since)
	if len(entries) != 5 {
		t.Fatalf("%d entries, want 5 (one before since, one not JSON): %+v", len(entries), entries)
	}
	lines := JournalLines(entries, 40)
	all := strings.Join(lines, "\n")
	if strings.Contains(all, sentinel) || strings.Contains(all, "bad-name") {
		t.Fatalf("the credentials file leaked:\n%s", all)
	}
	if !entries[0].Withheld || !strings.Contains(lines[0], "credentials file") {
		t.Errorf("first line = %q", lines[0])
	}
	if want := `error Gateway failed to start: Invalid config at /etc/openclaw/support/current/openclaw.json: | session: Unrecognized key: "bogusKey" | Run "openclaw doctor --fix" to repair, then retry.`; !strings.HasSuffix(lines[2], want) {
		t.Errorf("gateway line = %q", lines[2])
	}
	if !strings.Contains(lines[3], "hi�") {
		t.Errorf("byte-array message = %q", lines[3])
	}
	if !strings.Contains(lines[4], "status=78/CONFIG") {
		t.Errorf("last line = %q", lines[4])
	}
	if got := JournalLines(entries, 2); len(got) != 2 || got[1] != lines[4] {
		t.Errorf("JournalLines keeps the last lines: %q", got)
	}
}

func TestQuotesEnvironmentFile(t *testing.T) {
	for msg, want := range map[string]bool{
		"x.service: Ignoring invalid environment assignment 'A B': /etc/occ/x.env": true,
		"Failed to load environment files: No such file or directory":              false,
		"Started x.service.": false,
	} {
		if got := quotesEnvironmentFile("", msg); got != want {
			t.Errorf("%q: %v", msg, got)
		}
	}
}

func TestStartupRecordsFromJournal(t *testing.T) {
	out := `{"__REALTIME_TIMESTAMP":"1","MESSAGE":"{\"event\":\"openclaw.model_probe\",\"time\":\"2026-11-29T10:00:00Z\",\"container\":\"gateway\",\"code\":\"AUTHENTICATION_FAILED\",\"final\":true,\"providerCode\":401}"}
{"__REALTIME_TIMESTAMP":"2","MESSAGE":"{\"event\":\"runtime.startup_phase\",\"time\":\"2026-11-29T10:00:00Z\",\"phase\":\"nonsense\"}"}`
	records, bad := StartupRecords(ParseJournal(out, time.Time{}))
	if len(records) != 1 || records[0].Code != "AUTHENTICATION_FAILED" || records[0].ProviderCode != 401 {
		t.Errorf("records = %+v", records)
	}
	if bad == nil || !strings.Contains(bad.Error(), "phase") {
		t.Errorf("bad = %v", bad)
	}
}

func TestParseUnitState(t *testing.T) {
	cases := []struct {
		out    string
		failed bool
		desc   string
	}{
		{"LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\nExecMainCode=0\nExecMainStatus=0\nNRestarts=0\nInvocationID=abc\n", false, "active (running)"},
		{"ActiveState=activating\nSubState=auto-restart\nResult=exit-code\nExecMainCode=1\nExecMainStatus=78\nNRestarts=1\n", true,
			"activating (auto-restart), result exit-code, main process exited with status 78 (CONFIG), 1 automatic restart(s)"},
		{"ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainCode=1\nExecMainStatus=203\nNRestarts=0\n", true,
			"failed (failed), result exit-code, main process exited with status 203 (EXEC: the binary cannot be run)"},
		{"ActiveState=activating\nSubState=start\nNRestarts=0\n", false, "activating (start)"},
		{"ActiveState=active\nSubState=running\nNRestarts=2\nExecMainCode=2\nExecMainStatus=9\n", true, "active (running), main process killed by signal 9, 2 automatic restart(s)"},
		{"ActiveState=inactive\nSubState=dead\n", true, "inactive (dead)"},
	}
	for _, c := range cases {
		s := ParseUnitState(c.out)
		if s.Failed() != c.failed || s.String() != c.desc {
			t.Errorf("%q: failed=%v %q", c.out, s.Failed(), s.String())
		}
	}
}

func TestParseObservedJudgesDrift(t *testing.T) {
	active := "unit_file=present\nLoadState=loaded\nActiveState=active\nSubState=running\nagent_dir=/etc/openclaw/support\n"
	act := `activation={"agent":"support","revision":2,"revision_id":"abc","digest":"d2","activated_at":"2026-11-29T10:00:00Z","endpoint":"http://127.0.0.1:18789"}` + "\n"
	cases := map[string]struct {
		out    string
		exists bool
		drift  string
	}{
		"absent":          {"unit_file=absent\nLoadState=not-found\nActiveState=inactive\nagent_dir=\n", false, ""},
		"ok":              {active + "current=r2\ndigest=d2\n" + act + "revisions=r1 r2 \n", true, ""},
		"stopped":         {strings.Replace(active, "ActiveState=active", "ActiveState=inactive", 1) + "current=r2\ndigest=d2\n" + act, true, "the unit is inactive"},
		"unit removed":    {strings.Replace(active, "present", "absent", 1) + "current=r2\ndigest=d2\n" + act, true, "unit file was removed"},
		"edited":          {active + "current=r2\ndigest=e9\n" + act, true, "was edited on the host"},
		"never activated": {active + "current=r3\ndigest=d3\nrevisions=r1 r2 r3\n", true, "revision 3 is selected but was never activated"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := parseObserved(c.out)
			if o.Exists != c.exists || (c.drift == "") != (o.Drift == "") || !strings.Contains(o.Drift, c.drift) {
				t.Fatalf("exists=%v drift=%q", o.Exists, o.Drift)
			}
			if name == "ok" && (o.Current != 2 || o.Activation.RevisionID != "abc" || len(o.Revisions) != 2 || o.AgentDir != "/etc/openclaw/support") {
				t.Errorf("%+v", o)
			}
		})
	}
}

func TestAdviceFromExitAndJournal(t *testing.T) {
	h := &render.SystemdHost{Unit: "occ-agent-support.service", EnvironmentFile: "/etc/occ/openclaw.env", User: "occ-support"}
	entry := func(m string) []JournalEntry { return []JournalEntry{{Message: m}} }
	for want, c := range map[string]struct {
		st UnitState
		e  []JournalEntry
	}{
		"cannot read the credentials file /etc/occ/openclaw.env": {UnitState{}, entry("occ-agent-support.service: Failed to load environment files: No such file or directory")},
		"openclaw_path cannot be executed":                       {UnitState{ExecMainCode: 1, ExecMainStatus: 203}, nil},
		"refused its configuration":                              {UnitState{ExecMainCode: 1, ExecMainStatus: 78}, nil},
		"journalctl -u occ-agent-support.service":                {UnitState{ExecMainCode: 2, ExecMainStatus: 9}, nil},
	} {
		if got := advice(c.st, c.e, h); !strings.Contains(got, want) {
			t.Errorf("advice = %q, want %q", got, want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	root := &Conn{target: Target{User: "root"}}
	if got := root.command(`echo "$1"`, []string{"it's"}); got != `/bin/sh -c 'echo "$1"' occ 'it'\''s'` {
		t.Errorf("root: %s", got)
	}
	op := &Conn{target: Target{User: "occ"}}
	if got := op.command("true", nil); got != `sudo -n -- /bin/sh -c 'true' occ` {
		t.Errorf("operator: %s", got)
	}
}

func TestTail(t *testing.T) {
	s := strings.Repeat("line\n", 30) + "last\n"
	if got := tail(s, 3, 100); got != "line\nline\nlast" {
		t.Errorf("%q", got)
	}
	if got := tail(strings.Repeat("x", 50), 3, 10); got != "…xxxxxxxxxx" {
		t.Errorf("%q", got)
	}
}
