package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

type diagnostics = diag.Diagnostics

// deployOutcome is what apply records about a deployment.
type deployOutcome struct {
	Status      types.String
	ActivatedAt types.String
	Endpoint    types.String
	// Wrote is true when anything reached the target, so that a failed
	// create stays in state (tainted) and the next apply converges.
	Wrote bool
}

// deploy hands an admitted revision to the executor of its compute kind.
// serving is the revision state says is active (0 on create).
func deploy(ctx context.Context, data *Data, rev *admission.Revision, c admission.Compute, revision, serving int64) (deployOutcome, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := deployOutcome{Status: types.StringValue("failed"), ActivatedAt: types.StringNull(), Endpoint: types.StringNull()}
	fields := mergeFields(work("agent "+rev.Agent, "deploy"), map[string]any{"revision": revision, "compute_kind": c.Kind})
	if c.Kind == admission.KindSSH {
		return deploySSH(ctx, data, rev, c, revision, fields)
	}
	exec, err := data.KubeExecutor(ctx)
	if err != nil {
		diags.AddError("UNAVAILABLE: cannot reach Kubernetes", fmt.Sprintf("%v. Nothing was written. Check the provider's kubernetes settings.", err))
		return out, diags
	}
	exec.Log = func(msg string, f map[string]any) { tflog.Debug(ctx, msg, mergeFields(fields, f)) }
	if _, err := data.PrepareCompute(ctx, exec, c); err != nil {
		addNamespaceError(&diags, rev.ComputeSettings.Namespace, err)
		return out, diags
	}
	if c.SandboxDriver != nil && rev.ExecutionMode == admission.ModeDedicated {
		if !awaitDriver(ctx, exec, rev, c, fields, &diags) {
			return out, diags
		}
	}
	start := time.Now()
	res, err := exec.Deploy(ctx, rev, revision, serving)
	if err != nil {
		var nw *kube.NotWritten
		out.Wrote = !errors.As(err, &nw)
		tflog.Info(ctx, "deployment failed", withOutcome(fields, "failed"))
		addDeployError(&diags, rev, revision, err)
		return out, diags
	}
	return activated(ctx, fields, start, res.ActivatedAt, res.Endpoint), diags
}

// activated is the outcome of a deployment that activated, logged once.
func activated(ctx context.Context, fields map[string]any, start, at time.Time, endpoint string) deployOutcome {
	tflog.Info(ctx, "revision activated", mergeFields(withOutcome(fields, "activated"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
	return deployOutcome{Wrote: true, Status: types.StringValue("active"),
		ActivatedAt: types.StringValue(at.Format(time.RFC3339)), Endpoint: types.StringValue(endpoint)}
}

func withOutcome(f map[string]any, outcome string) map[string]any {
	return mergeFields(f, map[string]any{"work.outcome": outcome})
}

func mergeFields(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// awaitDriver checks the sandbox driver live before the first write of a
// dedicated revision (AD6): a driver the cluster does not serve is refused
// with ND5's RESOURCE_CONFLICT; during an outage provisioning waits, with
// a watch, within the apply's deadline (ND5).
func awaitDriver(ctx context.Context, exec *kube.Executor, rev *admission.Revision, c admission.Compute, fields map[string]any, diags *diag.Diagnostics) bool {
	st, err := exec.DriverState(ctx, c.SandboxDriver)
	if err != nil {
		diags.AddError("UNAVAILABLE: cannot read the sandbox driver", err.Error()+". Nothing was written.")
		return false
	}
	if !st.Installed {
		addAdmissionErrors(diags, path.Root("compute"), admission.CheckSandbox(rev.Harness, rev.ExecutionMode, st.Observed(c)))
		return false
	}
	if st.Ready {
		return true
	}
	tflog.Info(ctx, "waiting for the sandbox driver", mergeFields(fields, map[string]any{"work.operation": "await-driver", "driver": c.SandboxDriver.Name, "detail": st.Detail}))
	started := time.Now()
	if err := exec.WaitForDriver(ctx, c.SandboxDriver); err != nil {
		diags.AddError(fmt.Sprintf("UNAVAILABLE: the sandbox driver %q stayed unavailable", c.SandboxDriver.Name),
			fmt.Sprintf("Agent %q: %s; the apply waited for it until its deadline (%v). Nothing was written. Next: restore the driver's gateway, or raise timeouts.create/update, and apply again.", rev.Agent, st.Detail, err))
		return false
	}
	diags.AddWarning(fmt.Sprintf("The sandbox driver %q was unavailable; provisioning waited for it", c.SandboxDriver.Name),
		fmt.Sprintf("Agent %q: %s when the apply started; provisioning waited %s for the driver's gateway to be ready again, then went on.", rev.Agent, st.Detail, time.Since(started).Round(time.Second)))
	return true
}

// addDeployError turns an executor failure into a diagnostic that says what
// happened, where, with the record's structured fields, and what to do.
func addDeployError(diags *diag.Diagnostics, rev *admission.Revision, n int64, err error) {
	var f *kube.Failure
	if !errors.As(err, &f) {
		diags.AddError(fmt.Sprintf("DEPLOYMENT_FAILED: agent %q revision %d", rev.Agent, n), err.Error())
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Agent %q, revision %d (%s)", f.Agent, f.Revision, rev.ID())
	if f.Container != "" {
		fmt.Fprintf(&b, ", container %s", f.Container)
	}
	if f.Phase != "" {
		fmt.Fprintf(&b, ", phase %s", f.Phase)
	}
	b.WriteString(".\n")
	if f.Reason != "" {
		fmt.Fprintf(&b, "What happened: %s.\n", f.Reason)
	}
	if r := f.Record; r != nil {
		fmt.Fprintf(&b, "Startup record: %s", r.Event)
		add := func(k string, v any) { fmt.Fprintf(&b, ", %s %v", k, v) }
		if r.Attempt > 0 {
			add("attempt", r.Attempt)
		}
		if r.ExitCode != nil {
			add("exitCode", *r.ExitCode)
		}
		if r.Signal != "" {
			add("signal", r.Signal)
		}
		if r.Code != "" {
			add("code", r.Code)
		}
		for _, kv := range [][2]string{{"failureClass", r.FailureClass}, {"causeKind", r.CauseKind}, {"causeDetail", r.CauseDetail},
			{"bodyShape", r.BodyShape}, {"providerErrorCode", r.ProviderErrorCode}, {"providerErrorType", r.ProviderErrorType}} {
			if kv[1] != "" {
				add(kv[0], kv[1])
			}
		}
		if r.ProviderCode != 0 {
			add("providerCode", r.ProviderCode)
		}
		if len(r.ResponseHeaderMarker) > 0 {
			add("responseHeaderMarker", strings.Join(r.ResponseHeaderMarker, ","))
		}
		b.WriteString(".\n")
	}
	if len(f.LogTail) > 0 {
		b.WriteString("Last log lines:\n")
		for _, l := range f.LogTail {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if f.Next != "" {
		fmt.Fprintf(&b, "Next: %s", f.Next)
	}
	diags.AddError(fmt.Sprintf("%s: agent %q revision %d did not activate", f.Code, f.Agent, f.Revision), b.String())
}

// components lists the Deployments a revision runs, and the component a
// Sandbox holds when the compute's sandbox driver contains the dedicated
// harness (render.Sandboxed).
func components(harness, mode string, sandboxed bool) (deployments []string, sandbox string) {
	switch {
	case mode != admission.ModeDedicated:
		return []string{render.ComponentGateway}, ""
	case sandboxed && harness == admission.HarnessOpenClaw:
		return []string{render.ComponentGateway}, render.ComponentNode
	case sandboxed:
		return []string{render.ComponentGateway}, render.ComponentHarness
	}
	return []string{render.ComponentGateway, render.ComponentHarness}, ""
}

// addNamespaceError reports a namespace the provider cannot use.
func addNamespaceError(diags *diag.Diagnostics, ns string, err error) {
	var mp *kube.MissingPermissions
	if errors.As(err, &mp) {
		diags.AddError(fmt.Sprintf("RESOURCE_CONFLICT: missing permissions in namespace %s", ns),
			fmt.Sprintf("The provider's Kubernetes identity may not:\n  - %s\nGrant them with the Role in the provider documentation (Kubernetes permissions), then apply again. Nothing was written.",
				strings.Join(mp.Missing, "\n  - ")))
		return
	}
	diags.AddError(fmt.Sprintf("UNAVAILABLE: cannot prepare namespace %s", ns), err.Error()+". Nothing was written.")
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
