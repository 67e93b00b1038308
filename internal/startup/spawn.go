package startup

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Spawn writes the process_spawn record and execs the runtime in this
// process (same PID, so the runtime owns the container's lifecycle and
// receives its signals). It returns only when exec fails.
func Spawn(rec *Recorder, res Result, env []string) error {
	began := rec.now()
	if err := rec.Phase(runtimerecord.PhaseProcessSpawn, runtimerecord.OutcomeOK, began, nil); err != nil {
		return err
	}
	signal.Reset()
	err := syscall.Exec(res.Path, res.Argv, env)
	_ = rec.Phase(runtimerecord.PhaseProcessSpawn, runtimerecord.OutcomeFailed, began.Add(-time.Nanosecond), nil)
	return fmt.Errorf("startup: exec of the runtime failed: %w", err)
}
