package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// reasonFirst is the revision_reason of an agent's first revision.
const reasonFirst = "the agent's first revision"

// revisionReason says why the plan gives an agent the new revision rev:
// what differs from the revision state holds (admission.RevisionChanges
// over state's inputs, admitted again, and the planned ones). When no
// input differs, the difference is the provider's own (a release that
// pins another runtime or renders differently): the reason says so, and
// a warning says how to hold the runtime until the operator opts in.
func revisionReason(ctx context.Context, state agentModel, rev *admission.Revision, c admission.Compute, diags *diag.Diagnostics) string {
	if state.RevisionID.IsNull() || state.Revision.IsNull() {
		return reasonFirst
	}
	if s := state.Status.ValueString(); strings.HasPrefix(s, "drifted: ") {
		return "the agent drifted (" + strings.TrimPrefix(s, "drifted: ") + "): the apply deploys it again"
	}
	if state.Compute.IsNull() || state.Configuration.IsNull() {
		return "the configuration differs from the imported revision"
	}
	var ignored diag.Diagnostics
	in, known := agentInput(ctx, state, state.Harness, &ignored)
	if !known || ignored.HasError() {
		return "its inputs changed"
	}
	old, errs := admission.Admit(in)
	if len(errs) > 0 {
		return "its inputs changed (the revision in state is not admitted by this provider release any more)"
	}
	if changes := admission.RevisionChanges(old, rev); len(changes) > 0 {
		return strings.Join(changes, "; ")
	}
	// The same inputs give another revision id: this provider release.
	var what []string
	if prev := state.HarnessVersion.ValueString(); prev != "" && prev != rev.HarnessVersion {
		what = append(what, fmt.Sprintf("the pinned harness version %q → %q", prev, rev.HarnessVersion))
	}
	if prev, err := occconfig.Parse(state.AdmittedDocument.ValueString()); err == nil && !state.AdmittedDocument.IsNull() {
		if at := admission.DocumentChanges(prev, rev.AdmittedDocument); at != "" {
			what = append(what, "what the platform writes into configuration document"+at)
		}
	}
	if len(what) == 0 {
		what = append(what, "how the revision is rendered")
	}
	reason := "this provider release changes " + strings.Join(what, " and ") + "; no input of the agent changed"
	hold := ""
	if c.Kind == admission.KindKubernetes {
		if img := admission.PinnedImageOf(state.HarnessVersion.ValueString()); img != "" {
			attr := "runtime_image"
			if rev.Harness == admission.HarnessCodex {
				attr = "codex_image"
			}
			hold = fmt.Sprintf(" To keep the running version until you choose to upgrade, set the compute's kubernetes.%s = %q (and, for the gateway of a dedicated Codex agent, runtime_image to the previous release's openclaw image; see the CHANGELOG), then apply the upgrade when you are ready by removing it.", attr, img)
		}
	}
	diags.AddAttributeWarning(path.Root("revision_id"), "A provider upgrade gives the agent a new revision",
		fmt.Sprintf("Agent %q: %s. Applying restarts it with the new revision (its Pods are replaced, or its unit restarted) and runs its startup probe.%s", rev.Agent, reason, hold))
	return reason
}

// keepReason is the plan's revision_reason while the revision stays:
// state's.
func keepReason(state agentModel) types.String {
	if state.RevisionReason.IsNull() || state.RevisionReason.IsUnknown() {
		return types.StringNull()
	}
	return state.RevisionReason
}
