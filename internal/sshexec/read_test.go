package sshexec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// A refresh has a deadline of its own: a host that accepts the session
// but never answers (here every command hangs, as a hung systemctl would)
// fails the refresh with UNAVAILABLE after ReadTimeout, naming it, instead
// of holding `terraform plan` for ever.
func TestReadHasADeadline(t *testing.T) {
	// The test harness's own probe ("true") answers; every other command hangs.
	_, tg, pool := plainSSHD(t, `ForceCommand if [ "$SSH_ORIGINAL_COMMAND" = true ]; then exit 0; fi; sleep 600`)
	e := &Executor{Pool: pool, ReadTimeout: 2 * time.Second}
	c := &admission.Compute{Kind: admission.KindSSH, Host: tg.Host, Port: int64(tg.Port), User: tg.User, HostKey: tg.HostKey}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.Read(ctx, executor.Agent{Name: "support", Compute: c})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Unavailable || !strings.Contains(err.Error()+f.Detail(""), "did not answer the refresh within 2s") {
		t.Fatalf("Read of a hung host: %v, want UNAVAILABLE naming the 2s deadline", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the refresh took %s; its deadline is 2s", d)
	}
}
