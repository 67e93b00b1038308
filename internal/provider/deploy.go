package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

type diagnostics = diag.Diagnostics

// deployOutcome is what apply records about a deployment.
type deployOutcome struct {
	Status      types.String
	ActivatedAt types.String
	Endpoint    types.String
	Phases      types.List
	// Wrote is true when anything reached the target, so that a failed
	// create stays in state (tainted) and the next apply converges.
	Wrote bool
	// Code is the failure's code; empty when the revision activated.
	Code executor.Code
}

// deploy hands a deployment to the executor of its compute kind: the
// deploy of a new revision (ModeActivate) or the finish of one that
// already serves (ModeFinish). d.Log is set here.
func deploy(ctx context.Context, data *Data, d executor.Deployment) (deployOutcome, diag.Diagnostics) {
	var diags diag.Diagnostics
	rev, c := d.Revision, d.Compute
	out := deployOutcome{Status: types.StringValue("failed"), ActivatedAt: types.StringNull(), Endpoint: types.StringNull(), Phases: types.ListNull(phaseType)}
	fields := executor.Fields(work("agent "+rev.Agent, "deploy"), map[string]any{"revision": d.N, "compute_kind": c.Kind})
	ex, err := data.executor(ctx, c.Kind)
	if err != nil {
		out.Code = failureCode(err)
		addFailure(&diags, rev.ID(), err)
		return out, diags
	}
	start := time.Now()
	d.Log = logTo(ctx, fields)
	res, err := ex.Deploy(ctx, d)
	addExecutorWarnings(&diags, res.Warnings)
	if err != nil {
		out.Wrote, out.Code = executor.Wrote(err), failureCode(err)
		tflog.Info(ctx, "deployment failed", executor.Fields(withOutcome(fields, "failed"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
		addFailure(&diags, rev.ID(), err)
		return out, diags
	}
	tflog.Info(ctx, "revision activated", executor.Fields(withOutcome(fields, "activated"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
	return deployOutcome{Wrote: true, Status: types.StringValue("active"),
		ActivatedAt: types.StringValue(res.ActivatedAt.Format(time.RFC3339)), Endpoint: types.StringValue(res.Endpoint), Phases: phasesValue(res.Phases)}, diags
}

// syncNetwork writes an agent's network policies and Service exposure
// for the revision that serves and does not change (d in ModeSettings);
// it returns the agent's endpoint ("" when the executor has none to
// report).
func syncNetwork(ctx context.Context, data *Data, d executor.Deployment) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	rev, c := d.Revision, d.Compute
	fields := executor.Fields(work("agent "+rev.Agent, "network-policy"), map[string]any{"revision": d.N, "compute_kind": c.Kind})
	ex, err := data.executor(ctx, c.Kind)
	var res executor.Result
	if err == nil {
		d.Log = logTo(ctx, fields)
		res, err = ex.Deploy(ctx, d)
	}
	if err != nil {
		tflog.Info(ctx, "network policies and exposure not written", withOutcome(fields, "failed"))
		addFailure(&diags, rev.ID(), err)
		return "", diags
	}
	tflog.Info(ctx, "network policies and exposure written", withOutcome(fields, "applied"))
	return res.Endpoint, diags
}

// failureCode is err's code, as addFailure reports it.
func failureCode(err error) executor.Code {
	var f *executor.Failure
	if errors.As(err, &f) {
		return f.Code
	}
	var one *admission.Error
	if errors.As(err, &one) {
		return executor.Code(one.Class)
	}
	var es admission.Errors
	if errors.As(err, &es) && len(es) > 0 {
		return executor.Code(es[0].Class)
	}
	return executor.DeploymentFailed
}

func withOutcome(f map[string]any, outcome string) map[string]any {
	return executor.Fields(f, map[string]any{"work.outcome": outcome})
}

// work starts the log fields of one reconciliation (LG5): work.id is fresh
// for every operation on a resource, so that its log lines correlate
// without carrying the runtime's identity; work.target names what is being
// reconciled. Executors add work.operation phases and work.outcome.
func work(target, operation string) map[string]any {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return map[string]any{"work.id": hex.EncodeToString(b), "work.target": target, "work.operation": operation, "work.attempt": 1}
}
