package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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
	fields := map[string]any{"work.id": rev.Agent, "work.operation": "deploy", "work.attempt": 1, "revision": revision, "compute_kind": c.Kind}
	if c.Kind == admission.KindSSH {
		return deploySSH(ctx, data, rev, c, revision, fields)
	}
	exec, err := data.KubeExecutor(ctx)
	if err != nil {
		diags.AddError("UNAVAILABLE: cannot reach Kubernetes", fmt.Sprintf("%v. Nothing was written. Check the provider's kubernetes settings.", err))
		return out, diags
	}
	exec.Log = func(msg string, f map[string]any) { tflog.Debug(ctx, msg, mergeFields(fields, f)) }
	if err := data.PrepareNamespace(ctx, exec, rev.ComputeSettings.Namespace); err != nil {
		addNamespaceError(&diags, rev.ComputeSettings.Namespace, err)
		return out, diags
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
	out.Wrote = true
	out.Status = types.StringValue("active")
	out.ActivatedAt = types.StringValue(res.ActivatedAt.Format(time.RFC3339))
	out.Endpoint = types.StringValue(res.Endpoint)
	tflog.Info(ctx, "revision activated", mergeFields(withOutcome(fields, "activated"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
	return out, diags
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

// components lists the workloads a revision runs.
func components(harness, mode string) []string {
	if mode == admission.ModeDedicated {
		return []string{render.ComponentGateway, render.ComponentHarness}
	}
	return []string{render.ComponentGateway}
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
