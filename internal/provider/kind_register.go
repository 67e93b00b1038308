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
}

// RegisterKind wires a compute kind into the provider with one call: its
// block joins occ_compute and every compute reference, and occ_agent
// deploys, reads, imports (by id) and destroys its agents through its
// executor. Its agents' resource identity is their name alone: the
// identity's target attributes (namespace, host and port) are the bundled
// kinds', so an import block names them by id, and the occ_agent list
// resource does not list them. Meant for package initialisation: not safe
// beside running operations.
func RegisterKind(k Kind) error {
	if k.Executor == nil || k.Where == nil {
		return fmt.Errorf("provider: compute kind %q: a kind needs its executor and where its agents run", k.Name)
	}
	nameOnly := func(agent string) agentIdentityModel {
		return agentIdentityModel{Name: types.StringValue(agent), Namespace: types.StringNull(), Host: types.StringNull(), Port: types.Int64Null()}
	}
	return registerKind(k.Name, kindRow{
		block: k.Block, blockSchema: k.Schema, settings: k.Settings, validate: k.Validate, hint: k.Hint, where: k.Where,
		build:    func(context.Context, *Data) (executor.Executor, error) { return k.Executor, nil },
		agentID:  k.AgentID,
		identity: func(_ admission.Compute, agent string) agentIdentityModel { return nameOnly(agent) },
		identityOfID: func(id string) (agentIdentityModel, bool) {
			name, ok, err := k.Executor.ParseImportID(id)
			return nameOnly(name), ok && err == nil
		},
		claims:     func(agentIdentityModel) bool { return false },
		importID:   func(agentIdentityModel) string { return "" },
		listTarget: func(agentIdentityModel) (admission.Compute, string) { return admission.Compute{Kind: k.Name}, k.Name },
	})
}
