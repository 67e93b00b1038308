package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12 and later): the attributes that find a
// resource's object again, kept by Terraform beside state, written in an
// `import` block's `identity` instead of an import id string, and returned
// by the occ_agent list resource for `terraform query`. Older clients and
// OpenTofu ignore it; the import id strings keep working everywhere.

// nameIdentityModel is the identity of a logical object (occ_compute,
// occ_configuration, occ_credential_source): its name, since it lives only
// in state.
type nameIdentityModel struct {
	Name types.String `tfsdk:"name"`
}

func nameIdentitySchema(what string) identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true,
			Description: "The " + what + "'s name. It lives only in state, so importing it records the name and the next plan fills its settings from configuration."},
	}}
}

// setIdentity writes v as the resource's identity; identity is nil when
// the framework passes none (never for a resource with an identity schema).
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, v any, diags *diag.Diagnostics) {
	if identity != nil {
		diags.Append(identity.Set(ctx, v)...)
	}
}

// setNameIdentity writes a logical object's identity from its name.
func setNameIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, name types.String, diags *diag.Diagnostics) {
	setIdentity(ctx, identity, nameIdentityModel{Name: name}, diags)
}

// importedName is the import id of a logical object: the id string, or
// the name its import block's identity gives.
func importedName(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) string {
	if req.ID != "" || req.Identity == nil {
		return req.ID
	}
	var m nameIdentityModel
	diags.Append(req.Identity.Get(ctx, &m)...)
	return m.Name.ValueString()
}

// agentIdentityOf is the identity of an agent: from its compute when state
// holds it, else (an import whose compute is not in state yet) from its id,
// read as each kind in importOrder would read it. ok is false when neither
// says.
func agentIdentityOf(ctx context.Context, compute types.Object, id, agent string) (agentIdentityModel, bool) {
	var ignored diag.Diagnostics
	if c, known := computeFromObject(ctx, compute, &ignored); known {
		if e, ok := executors[c.Kind]; ok {
			return e.identity(c, agent), true
		}
		return agentIdentityModel{}, false
	}
	for _, kind := range importOrder {
		if m, ok := executors[kind].identityOfID(id); ok {
			return m, true
		}
	}
	return agentIdentityModel{}, false
}
