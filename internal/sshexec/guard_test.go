package sshexec

import (
	"errors"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// rule AC3: an older apply never overwrites a newer selected revision on
// an SSH host, and a create never takes over another configuration's
// agent; both are judged before the first write.
func TestAC3_SSHGuardVerdict(t *testing.T) {
	rec := `{"agent":"support","revision":3,"revision_id":"aaaa","digest":"d","activated_at":"2026-12-01T00:00:00Z","endpoint":"http://127.0.0.1:18789"}`
	for _, tc := range []struct {
		name       string
		out        string
		n, serving int64
		id         string
		want       executor.Code // "" for admitted
	}{
		{"nothing on the host", "current=\n", 1, 0, "bbbb", ""},
		{"newer revision selected", "current=r3\n" + rec, 2, 1, "bbbb", executor.Stale},
		{"newer selected, never activated", "current=r3\n", 2, 1, "bbbb", executor.Stale},
		{"same number again (a cut activation)", "current=r3\n", 3, 2, "bbbb", ""},
		{"update over its own revision", "current=r3\n" + rec, 4, 3, "bbbb", ""},
		{"create over another configuration's agent", "current=r3\n" + rec, 1, 0, "bbbb", executor.ResourceConflict},
		{"create over an unfinished create", "current=r1\n", 1, 0, "bbbb", ""},
		{"create over the very revision planned (killed after activating)", "current=r3\n" + rec, 3, 0, "aaaa", ""},
		{"garbage record is no activation", "current=r1\n{not json", 1, 0, "bbbb", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guardVerdict("support", "10.0.0.5:22", tc.n, tc.serving, tc.id, parseSelected(tc.out))
			var f *executor.Failure
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &f) || f.Code != tc.want):
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}
