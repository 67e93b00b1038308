package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// By-value references: occ_agent takes occ_compute, occ_configuration and
// occ_credential_source whole (`compute = occ_compute.prod`). Such an
// attribute is an object attribute whose type is generated from the
// referenced resource's own schema type, so the two can never drift apart;
// Terraform drops any attribute of the passed object the type does not
// declare. Object attributes (rather than nested attributes) keep plans of
// hundreds of agents cheap: the framework resolves a nested attribute's
// schema at every element path, an object attribute's once.

// refType is a resource schema's object type without the dropped
// attributes, with some attribute types replaced.
func refType(s schema.Schema, drop []string, replace map[string]attr.Type) map[string]attr.Type {
	out := map[string]attr.Type{}
	for name, t := range schemaObjectType(s).AttrTypes {
		if slices.Contains(drop, name) {
			continue
		}
		if r, ok := replace[name]; ok {
			t = r
		}
		out[name] = t
	}
	return out
}

// schemaObjectType is the object type of a resource schema's attributes.
func schemaObjectType(s schema.Schema) types.ObjectType {
	return s.Type().(types.ObjectType)
}

// importLogicalByName adopts a logical object by name. Logical objects live
// only in state, so the import records the identity; the next plan fills the
// settings from configuration as an in-place update that writes nothing
// remote. An optional "@GENERATION" suffix keeps the generation the object
// had in its previous state.
func importLogicalByName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, hasGeneration bool) {
	id := importedName(ctx, req, &resp.Diagnostics)
	name, gen, err := parseImportID(id)
	if err == nil && gen > 0 && !hasGeneration {
		err = fmt.Errorf("import ID %q: this resource has no generation; import it by NAME", id)
	}
	if err != nil {
		resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import ID", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	setNameIdentity(ctx, resp.Identity, types.StringValue(name), &resp.Diagnostics)
	if gen > 0 {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("generation"), gen)...)
	}
}

// passWhole is the description of a by-value reference attribute: what it
// is, then how to write it, `attr = <resource type>.<name>`, the resource
// passed whole. Its nested fields are the referenced resource's own; the
// docs pages do not list them (templates/), since nobody writes them out.
func passWhole(what, attr, resourceType string) string {
	return fmt.Sprintf("%s Pass the `%s` resource whole, `%s = %s.<name>`; do not write its attributes out. Terraform converts the "+
		"resource to this attribute's type and drops what the type does not declare, so the attribute always follows the resource's "+
		"current values.", what, resourceType, attr, resourceType)
}
