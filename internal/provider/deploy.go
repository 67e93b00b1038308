package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
}

// deploy hands an admitted revision to the executor of its compute kind.
// serving is the revision state says is active (0 on create); finish asks
// only to finish the retirement after revision, which already serves
// (executor.Deployment.Finish).
func deploy(ctx context.Context, data *Data, rev *admission.Revision, c admission.Compute, revision, serving int64, finish bool, refs string) (deployOutcome, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := deployOutcome{Status: types.StringValue("failed"), ActivatedAt: types.StringNull(), Endpoint: types.StringNull(), Phases: types.ListNull(phaseType)}
	fields := executor.Fields(work("agent "+rev.Agent, "deploy"), map[string]any{"revision": revision, "compute_kind": c.Kind})
	ex, err := data.executor(ctx, c.Kind)
	if err != nil {
		addFailure(&diags, rev.ID(), err)
		return out, diags
	}
	start := time.Now()
	res, err := ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: c, N: revision, Serving: serving, Finish: finish, References: refs, Log: logTo(ctx, fields)})
	addExecutorWarnings(&diags, res.Warnings)
	if err != nil {
		out.Wrote = executor.Wrote(err)
		tflog.Info(ctx, "deployment failed", executor.Fields(withOutcome(fields, "failed"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
		addFailure(&diags, rev.ID(), err)
		return out, diags
	}
	tflog.Info(ctx, "revision activated", executor.Fields(withOutcome(fields, "activated"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
	return deployOutcome{Wrote: true, Status: types.StringValue("active"),
		ActivatedAt: types.StringValue(res.ActivatedAt.Format(time.RFC3339)), Endpoint: types.StringValue(res.Endpoint), Phases: phasesValue(res.Phases)}, diags
}

// syncNetwork writes an agent's network policies and Service exposure
// for revision n, which serves and does not change
// (executor.Deployment.NetworkOnly); it returns the agent's endpoint (""
// when the executor has none to report).
func syncNetwork(ctx context.Context, data *Data, rev *admission.Revision, c admission.Compute, n int64, refs string) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	fields := executor.Fields(work("agent "+rev.Agent, "network-policy"), map[string]any{"revision": n, "compute_kind": c.Kind})
	ex, err := data.executor(ctx, c.Kind)
	var res executor.Result
	if err == nil {
		res, err = ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: c, N: n, Serving: n, NetworkOnly: true, References: refs, Log: logTo(ctx, fields)})
	}
	if err != nil {
		tflog.Info(ctx, "network policies and exposure not written", withOutcome(fields, "failed"))
		addFailure(&diags, rev.ID(), err)
		return "", diags
	}
	tflog.Info(ctx, "network policies and exposure written", withOutcome(fields, "applied"))
	return res.Endpoint, diags
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
