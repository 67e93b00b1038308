package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/rollout"
)

// rolloutModel is the provider's rollout setting.
type rolloutModel struct {
	HaltOnFailure types.Bool  `tfsdk:"halt_on_failure"`
	Canary        types.Int64 `tfsdk:"canary"`
	MaxParallel   types.Int64 `tfsdk:"max_parallel"`
}

const (
	defaultCanary = 1
)

func rolloutSchema() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Fleet-safe applies: the Agents one apply deploys share a gate in the provider process. For each change they deploy (a configuration " +
			"or credential source at a new generation), the first `canary` Agents go first and the others wait for them; at most `max_parallel` deploys run at once; " +
			"with `halt_on_failure`, once an Agent fails deploying a change, the Agents of the same apply that would deploy it fail at once with `ROLLOUT_HALTED`, " +
			"naming the Agent that failed and its code, write nothing, and keep serving what they served. Unset: every Agent deploys as soon as Terraform starts it. " +
			"Separate applies do not share a gate. See the Preflight and rollouts guide.",
		Attributes: map[string]schema.Attribute{
			"halt_on_failure": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Stop the Agents of the apply that would deploy a change once one of them failed deploying it. Default `true`."},
			"canary": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "How many Agents deploy a change before the other Agents of the apply start it. Default `1`; `0` starts them all together."},
			"max_parallel": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "At most this many deploys run at once. Default: no bound (Terraform's own `-parallelism`, 10, still holds)."},
		},
	}
}

// rolloutGate reads the setting into a gate; nil when it is unset (or not
// known: the gate is a property of the apply, decided at Configure).
func rolloutGate(ctx context.Context, v types.Object, diags *diag.Diagnostics) *rollout.Gate {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	var m rolloutModel
	diags.Append(v.As(ctx, &m, objectAsOptions)...)
	if diags.HasError() {
		return nil
	}
	s := rollout.Settings{HaltOnFailure: true, Canary: defaultCanary}
	if !m.HaltOnFailure.IsNull() && !m.HaltOnFailure.IsUnknown() {
		s.HaltOnFailure = m.HaltOnFailure.ValueBool()
	}
	if !m.Canary.IsNull() && !m.Canary.IsUnknown() {
		s.Canary = int(m.Canary.ValueInt64())
	}
	if !m.MaxParallel.IsNull() && !m.MaxParallel.IsUnknown() {
		s.MaxParallel = int(m.MaxParallel.ValueInt64())
	}
	return rollout.New(s)
}

// revisionChanges names what a deploy of rev changes for the rollout
// gate: its configuration and its credential source, each at its
// generation, where they differ from the revision that serves (was nil: a
// create, everything is new).
func revisionChanges(rev, was *admission.Revision) []string {
	var out []string
	if was == nil || was.ConfigurationID != rev.ConfigurationID || was.ConfigurationGeneration != rev.ConfigurationGeneration {
		out = append(out, rollout.Key("configuration", rev.ConfigurationID, rev.ConfigurationGeneration))
	}
	if rev.Source.ID != "" && (was == nil || was.Source.ID != rev.Source.ID || was.Source.Generation != rev.Source.Generation) {
		out = append(out, rollout.Key("credential source", rev.Source.ID, rev.Source.Generation))
	}
	return out
}

// servingRevision admits state's inputs again: the revision that serves,
// as far as the gate needs it. nil when it cannot (then every input counts
// as changed).
func servingRevision(ctx context.Context, state agentModel) *admission.Revision {
	var ignored diag.Diagnostics
	in, known := agentInput(ctx, state, state.Harness, &ignored)
	if ignored.HasError() || !known {
		return nil
	}
	rev, errs := admission.Admit(in)
	if len(errs) > 0 {
		return nil
	}
	return rev
}

// gated runs deploy through the provider's rollout gate when it has one:
// it waits for its turn (canaries, max_parallel), or fails at once,
// writing nothing, when its change already failed on another agent.
func gated(ctx context.Context, data *Data, rev *admission.Revision, changes []string, deploy func() (deployOutcome, diag.Diagnostics)) (deployOutcome, diag.Diagnostics) {
	if data == nil || data.rollout == nil {
		return deploy()
	}
	agent := rev.Agent
	t, err := data.rollout.Enter(ctx, agent, changes)
	if err != nil {
		var diags diag.Diagnostics
		out := deployOutcome{Status: types.StringValue("failed"), ActivatedAt: types.StringNull(), Endpoint: types.StringNull(), Phases: types.ListNull(phaseType)}
		var h *rollout.Halted
		if errors.As(err, &h) {
			diags.AddError(fmt.Sprintf("%s: agent %q was not deployed: agent %q failed the same change", executor.RolloutHalted, agent, h.FailedAgent),
				fmt.Sprintf("What happened: %s: agent %q failed with %s deploying %s in this apply, and the provider's rollout setting (halt_on_failure) stops the other agents that would deploy it. "+
					"Nothing of agent %q was written; what it served keeps serving.\nNext: Read agent %q's diagnostic, fix what it says, then apply again: this agent deploys the fixed change then.",
					executor.RolloutHalted, h.FailedAgent, h.Code, h.Change, agent, h.FailedAgent))
			return out, diags
		}
		addFailure(&diags, rev.ID(), &executor.Failure{Code: executor.Deadline, Agent: agent, Summary: fmt.Sprintf("agent %q waited for its turn in the rollout until the apply's deadline", agent),
			Reason: err.Error() + " (the rollout's canaries or max_parallel held it); nothing of it was written", Next: "Raise timeouts.create/update, or the provider's rollout.max_parallel, then apply again."})
		return out, diags
	}
	out, diags := deploy()
	t.Done(string(out.Code))
	return out, diags
}
