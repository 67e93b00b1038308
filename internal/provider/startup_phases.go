package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// The last activation's startup phases (PR9), as occ_agent records them:
// where the time of a deploy went, without TF_LOG.

var phaseAttrTypes = map[string]attr.Type{"component": types.StringType, "phase": types.StringType, "outcome": types.StringType, "duration_ms": types.Int64Type}

var phaseType = types.ObjectType{AttrTypes: phaseAttrTypes}

func startupPhasesSchema() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Computed: true,
		MarkdownDescription: "The startup phases of the current revision's last activation, as its runtime recorded them (rule PR9) and the apply read them by the time the " +
			"startup probe passed, in the order they began: `component` (`gateway`, `harness`, `node`), `phase` (`login`, `model_probe`, `peer_status`, " +
			"`workspace_setup`, `process_spawn`), `outcome` (`ok`, `skipped`) and `duration_ms`. Kept while the revision stays (a refresh does not change it); " +
			"unknown in a plan that deploys a new revision. Null over SSH, where the pinned OpenClaw gateway runs without the startup wrapper and writes no records, and for an imported agent.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"component":   schema.StringAttribute{Computed: true, MarkdownDescription: "The container the phase ran in."},
			"phase":       schema.StringAttribute{Computed: true, MarkdownDescription: "The phase."},
			"outcome":     schema.StringAttribute{Computed: true, MarkdownDescription: "How it ended."},
			"duration_ms": schema.Int64Attribute{Computed: true, MarkdownDescription: "How long it took, in milliseconds."},
		}},
	}
}

// phasesValue is the attribute value of an activation's phases: null
// when the runtime recorded none.
func phasesValue(phases []executor.PhaseTiming) types.List {
	if len(phases) == 0 {
		return types.ListNull(phaseType)
	}
	elems := make([]attr.Value, 0, len(phases))
	for _, p := range phases {
		elems = append(elems, types.ObjectValueMust(phaseAttrTypes, map[string]attr.Value{
			"component": types.StringValue(p.Component), "phase": types.StringValue(p.Phase),
			"outcome": types.StringValue(p.Outcome), "duration_ms": types.Int64Value(p.DurationMS)}))
	}
	return types.ListValueMust(phaseType, elems)
}

// keepPhases is the plan's startup_phases while the revision stays:
// state's, null when state has none (an imported agent).
func keepPhases(state agentModel) types.List {
	if state.StartupPhases.IsUnknown() || state.StartupPhases.IsNull() {
		return types.ListNull(phaseType)
	}
	return state.StartupPhases
}
