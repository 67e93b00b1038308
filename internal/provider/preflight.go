package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// preflightTimeout bounds one agent's preflight: a plan never waits on a
// target longer than this for it (the apply checks everything again).
const preflightTimeout = time.Minute

// preflightEnv turns the preflight off where the provider block does not
// say (an offline plan pipeline): "false" or "0".
const preflightEnv = "OCC_PREFLIGHT"

// preflightOn reads the provider's preflight setting: the attribute, else
// OCC_PREFLIGHT, else on. A value not known at plan turns it off.
func preflightOn(v types.Bool, getenv func(string) string) (bool, error) {
	switch {
	case v.IsUnknown():
		return false, nil
	case !v.IsNull():
		return v.ValueBool(), nil
	}
	s := strings.TrimSpace(getenv(preflightEnv))
	if s == "" {
		return true, nil
	}
	on, err := strconv.ParseBool(s)
	if err != nil {
		return true, fmt.Errorf("%s=%q is not a boolean (true, false, 1, 0)", preflightEnv, s)
	}
	return on, nil
}

// preflights remembers, per target, a preflight that could not reach it,
// so that the other agents of the plan on that target do not wait on it
// again and the plan warns once.
type preflights struct {
	mu   sync.Mutex
	down map[string]bool
}

func (p *preflights) isDown(target string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down[target]
}

// markDown records target as unreachable; it reports whether this call
// was the first to (and so warns).
func (p *preflights) markDown(target string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down == nil {
		p.down = map[string]bool{}
	}
	if p.down[target] {
		return false
	}
	p.down[target] = true
	return true
}

// preflight asks the compute's executor, reading only, what the deploy of
// revision n of rev (while serving serves) would meet, and reports it on
// the plan: a certain failure as an error with the code and next step the
// apply would give, a probable one as a warning. It runs only when the
// provider's preflight is on and the connection to the compute's kind is
// known at plan; a target that does not answer is a warning, once per
// target, and the apply decides.
func (d *Data) preflight(ctx context.Context, rev *admission.Revision, c admission.Compute, n, serving int64, diags *diag.Diagnostics) {
	if d == nil || !d.preflightOn || d.pending(c.Kind) != nil {
		return
	}
	target := c.Kind + " " + targetWhere(c)
	if d.preflights.isDown(target) {
		return
	}
	fields := executor.Fields(work("agent "+rev.Agent, "preflight"), map[string]any{"revision": n, "compute_kind": c.Kind})
	start := time.Now()
	ex, err := d.executor(ctx, c.Kind)
	var out executor.Preflighted
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, preflightTimeout)
		out, err = ex.Preflight(pctx, executor.Deployment{Revision: rev, Compute: c, Mode: executor.ModeActivate, N: n, Serving: serving, Log: logTo(ctx, fields)})
		cancel()
	}
	if err != nil {
		if d.preflights.markDown(target) {
			diags.AddWarning("The plan was not checked against "+targetWhere(c),
				fmt.Sprintf("The plan's preflight could not read the target of agent %q's compute %q (%s); the plan shows what admission allows, and the apply checks the target before it writes. "+
					"To plan without contacting targets, set preflight = false in the provider block (or %s=false).", rev.Agent, c.Name, errText(err), preflightEnv))
		}
		tflog.Info(ctx, "preflight could not read the target", executor.Fields(withOutcome(fields, "unavailable"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
		return
	}
	addExecutorWarnings(diags, out.Warnings)
	for _, r := range out.Refusals {
		addFailure(diags, rev.ID(), r)
	}
	outcome := "clear"
	if len(out.Refusals) > 0 {
		outcome = "refused"
	}
	tflog.Info(ctx, "preflight", executor.Fields(withOutcome(fields, outcome), map[string]any{"elapsed_ms": time.Since(start).Milliseconds(),
		"refusals": len(out.Refusals), "warnings": len(out.Warnings)}))
}

func errText(err error) string {
	var f *executor.Failure
	if errors.As(err, &f) {
		return string(f.Code) + ": " + f.SummaryText() + ": " + strings.TrimSuffix(f.Reason, ".")
	}
	return err.Error()
}
