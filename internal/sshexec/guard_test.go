package sshexec

import (
	"errors"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// rule AC3: an older apply never overwrites a newer selected revision on
// an SSH host, and a create never takes over another configuration's
// agent; both are judged before the first write. Issue 27: nor does a
// deploy from another config_dir take over the unit of an agent of the
// same name (one unit, state directory and user per name on a host),
// unless that unit selects the revision this agent serves (its compute's
// config_dir moved); nor a unit file of the name someone else wrote.
func TestAC3_SSHGuardVerdict(t *testing.T) {
	const dir = "/etc/openclaw/support"
	rec := `activation={"agent":"support","revision":3,"revision_id":"aaaa","digest":"d","activated_at":"2026-12-01T00:00:00Z","endpoint":"http://127.0.0.1:18789"}` + "\n"
	for _, tc := range []struct {
		name       string
		out        string
		n, serving int64
		id         string
		want       executor.Code // "" for admitted
		moved      string
	}{
		{"nothing on the host", "current=\nunit_dir=\n", 1, 0, "bbbb", "", ""},
		{"newer revision selected", "current=r3\n" + rec, 2, 1, "bbbb", executor.Stale, ""},
		{"newer selected, never activated", "current=r3\n", 2, 1, "bbbb", executor.Stale, ""},
		{"same number again (a cut activation)", "current=r3\n", 3, 2, "bbbb", "", ""},
		{"update over its own revision", "current=r3\n" + rec + "unit_dir=" + dir + "\n", 4, 3, "bbbb", "", ""},
		{"create over another configuration's agent", "current=r3\n" + rec, 1, 0, "bbbb", executor.ResourceConflict, ""},
		{"create over an unfinished create", "current=r1\n", 1, 0, "bbbb", "", ""},
		{"create over the very revision planned (killed after activating)", "current=r3\n" + rec, 3, 0, "aaaa", "", ""},
		{"garbage record is no activation", "current=r1\nactivation={not json\n", 1, 0, "bbbb", "", ""},
		{"create while a unit runs the name from another config_dir", "current=\nunit_dir=/srv/a/support\nunit_current=r3\nunit_" + rec, 1, 0, "bbbb", executor.ResourceConflict, ""},
		{"create while a unit of another config_dir has nothing activated", "current=\nunit_dir=/srv/a/support\nunit_current=\n", 1, 0, "bbbb", executor.ResourceConflict, ""},
		{"update while another config_dir's unit serves another revision", "current=r2\nunit_dir=/srv/a/support\nunit_current=r5\n", 3, 2, "bbbb", executor.ResourceConflict, ""},
		{"update after the compute's config_dir moved", "current=\nunit_dir=/srv/a/support\nunit_current=r3\nunit_" + rec, 4, 3, "bbbb", "", "/srv/a/support"},
		{"create over a unit file someone else wrote", "unit_foreign=1\ncurrent=\nunit_dir=\n", 1, 0, "bbbb", executor.ResourceConflict, ""},
		{"update while someone replaced the unit file", "unit_foreign=1\ncurrent=r3\n" + rec + "unit_dir=\n", 4, 3, "bbbb", executor.ResourceConflict, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moved, err := guardVerdict("support", "10.0.0.5:22", dir, tc.n, tc.serving, tc.id, parseSelected(tc.out))
			var f *executor.Failure
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &f) || f.Code != tc.want):
				t.Fatalf("err = %v, want %s", err, tc.want)
			case moved != tc.moved:
				t.Fatalf("moved = %q, want %q", moved, tc.moved)
			}
			if f != nil && strings.Contains(tc.out, "unit_dir=/srv/a/") {
				for _, w := range []string{"occ-agent-support.service", "/srv/a/support", dir, "config_dir /srv/a", "10.0.0.5:22/support"} {
					if !strings.Contains(f.Error()+" "+f.Next, w) {
						t.Errorf("the failure does not say %q: %v", w, f)
					}
				}
			}
		})
	}
}
