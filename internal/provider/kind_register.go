package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// Kind is a compute kind registered from outside this package
// (RegisterKind): what Terraform needs of it beside its admission row
// (admission.RegisterKind) and its executor.
type Kind struct {
	// Name is the kind, as its admission row names it.
	Name string
	// Block is the kind's attribute of occ_compute, Schema its schema and
	// Settings what admission takes of a known block: the kind's own
	// settings type, which its admission row and executor read.
	Block    string
	Schema   func() schema.SingleNestedAttribute
	Settings func(context.Context, types.Object, *diag.Diagnostics) any
	// Validate holds the block's static checks that span attributes (nil:
	// none); Hint says how to declare a block, in a refusal.
	Validate func(context.Context, types.Object, path.Path, *diag.Diagnostics)
	Hint     string
	// Where names an agent's target in messages ("in memory target t1").
	Where func(admission.Compute) string
	// Executor runs the kind's agents; AgentID is an agent's id on a
	// compute (the import id its executor's ParseImportID reads).
	Executor executor.Executor
	AgentID  func(admission.Compute, string) string
	// Target locates the kind's agents without their compute (nil: an
	// agent's identity is its name alone, and it is neither listed nor
	// read by data.occ_agent).
	Target *Target
}

// Target is the one string attribute that locates a registered kind's
// agents without their compute: it joins occ_agent's resource identity,
// the occ_agent list block and data.occ_agent, beside the bundled kinds'
// namespace, host and port.
type Target struct {
	// Attribute is its name, Description what it holds, Noun what it
	// names in refusals ("a memory target") and Example a value.
	Attribute, Description, Noun, Example string
	// Of reads it from a compute; Compute is the compute at a target, as
	// the executor's List and the kind's AgentID take it; FromID reads it
	// from an agent id the executor recognises.
	Of      func(admission.Compute) string
	Compute func(target string) admission.Compute
	FromID  func(id string) (string, bool)
}

// RegisterKind wires a compute kind into the provider with one call: its
// block joins occ_compute and every compute reference, occ_agent deploys,
// reads, imports and destroys its agents through its executor, and its
// Target (when set) joins the agent identity, the occ_agent list block and
// data.occ_agent. Meant for package initialisation: not safe beside
// running operations.
func RegisterKind(k Kind) error {
	if k.Executor == nil || k.Where == nil || k.AgentID == nil {
		return fmt.Errorf("provider: compute kind %q: a kind needs its executor, agent id and where its agents run", k.Name)
	}
	row := kindRow{
		block: k.Block, blockSchema: k.Schema, settings: k.Settings, validate: k.Validate, hint: k.Hint, where: k.Where,
		build:   func(context.Context, *Data) (executor.Executor, error) { return k.Executor, nil },
		agentID: k.AgentID,
	}
	t := k.Target
	if t == nil {
		nameOnly := func(agent string) agentIdentityModel { return agentIdentityModel{Name: types.StringValue(agent)} }
		row.identity = func(_ admission.Compute, agent string) agentIdentityModel { return nameOnly(agent) }
		row.identityOfID = func(id string) (agentIdentityModel, bool) {
			name, ok, err := k.Executor.ParseImportID(id)
			return nameOnly(name), ok && err == nil
		}
		row.importID = func(agentIdentityModel) string { return "" }
		row.listTarget = func(agentIdentityModel) (admission.Compute, string) { return admission.Compute{Kind: k.Name}, k.Name }
		return registerKind(k.Name, row)
	}
	if t.Attribute == "" || t.Of == nil || t.Compute == nil || t.FromID == nil {
		return fmt.Errorf("provider: compute kind %q: a target needs its attribute, Of, Compute and FromID", k.Name)
	}
	identity := func(target, agent string) agentIdentityModel {
		return agentIdentityModel{Name: types.StringValue(agent), Target: agentTarget{t.Attribute: types.StringValue(target)}}
	}
	row.target = []targetAttr{{name: t.Attribute, key: true, identity: t.Description, list: t.Description, data: t.Description,
		what: t.Noun, example: t.Example}}
	row.noun, row.claim = t.Noun, t.Attribute
	row.identity = func(c admission.Compute, agent string) agentIdentityModel { return identity(t.Of(c), agent) }
	row.identityOfID = func(id string) (agentIdentityModel, bool) {
		name, ok, err := k.Executor.ParseImportID(id)
		target, tok := t.FromID(id)
		return identity(target, name), ok && err == nil && tok
	}
	row.importID = func(m agentIdentityModel) string {
		return k.AgentID(t.Compute(m.Target.str(t.Attribute).ValueString()), m.Name.ValueString())
	}
	row.listTarget = func(m agentIdentityModel) (admission.Compute, string) {
		c := t.Compute(m.Target.str(t.Attribute).ValueString())
		return c, k.Where(c)
	}
	row.lookup = func(target, agent string) (string, string, string) {
		c := t.Compute(target)
		id := k.AgentID(c, agent)
		return id, id, k.Where(c)
	}
	return registerKind(k.Name, row)
}
