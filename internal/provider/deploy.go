package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

type diagnostics = diag.Diagnostics

// deploy hands an admitted revision to the executor of its compute kind.
// No executor exists yet: the Kubernetes and SSH executors are separate
// work, so apply says so plainly instead of pretending to deploy.
func deploy(ctx context.Context, rev *admission.Revision, c admission.Compute, revision int64) diag.Diagnostics {
	var diags diag.Diagnostics
	tflog.Info(ctx, "deployment refused: no executor", map[string]any{"work.operation": "deploy", "work.outcome": "unavailable", "compute_kind": c.Kind})
	diags.AddError("UNAVAILABLE: deployment is not available yet",
		fmt.Sprintf("Agent %q was admitted as revision %d (%s, %s %s), but this version of the provider cannot deploy to %s computes yet: "+
			"plan shows the exact revision that would run, and nothing was written to the %s target. "+
			"Use `terraform plan` to check combinations until the %s executor ships.",
			rev.Agent, revision, rev.HarnessVersion, rev.Harness, rev.ExecutionMode, c.Kind, c.Kind, c.Kind))
	return diags
}
