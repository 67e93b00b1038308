package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// By-value references: occ_agent takes occ_compute, occ_configuration and
// occ_credential_source whole (`compute = occ_compute.prod`). The nested
// schema of such an attribute is generated from the referenced resource's
// own schema type, so the two can never drift apart; Terraform drops any
// attribute of the passed object the reference does not declare.

// refAttributes turns an object type into optional nested attributes.
func refAttributes(t attr.Type, drop ...string) map[string]schema.Attribute {
	obj, ok := t.(attr.TypeWithAttributeTypes)
	if !ok {
		panic(fmt.Sprintf("refAttributes: %T is not an object type", t))
	}
	skip := map[string]bool{}
	for _, d := range drop {
		skip[d] = true
	}
	out := map[string]schema.Attribute{}
	for name, at := range obj.AttributeTypes() {
		if skip[name] {
			continue
		}
		out[name] = refAttribute(at)
	}
	return out
}

func refAttribute(t attr.Type) schema.Attribute {
	const desc = "Taken from the referenced object."
	switch tt := t.(type) {
	case basetypes.StringType:
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc}
	case basetypes.BoolType:
		return schema.BoolAttribute{Optional: true, MarkdownDescription: desc}
	case basetypes.Int64Type:
		return schema.Int64Attribute{Optional: true, MarkdownDescription: desc}
	case basetypes.ListType:
		return schema.ListAttribute{Optional: true, ElementType: tt.ElemType, MarkdownDescription: desc}
	case basetypes.SetType:
		return schema.SetAttribute{Optional: true, ElementType: tt.ElemType, MarkdownDescription: desc}
	case basetypes.MapType:
		if ot, ok := tt.ElemType.(basetypes.ObjectType); ok {
			return schema.MapNestedAttribute{Optional: true, MarkdownDescription: desc,
				NestedObject: schema.NestedAttributeObject{Attributes: refAttributes(ot)}}
		}
		return schema.MapAttribute{Optional: true, ElementType: tt.ElemType, MarkdownDescription: desc}
	case basetypes.ObjectType:
		return schema.SingleNestedAttribute{Optional: true, Attributes: refAttributes(tt), MarkdownDescription: desc}
	}
	panic(fmt.Sprintf("refAttribute: unsupported type %T", t))
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
	name, gen, err := parseImportID(req.ID)
	if err == nil && gen > 0 && !hasGeneration {
		err = fmt.Errorf("import ID %q: this resource has no generation; import it by NAME", req.ID)
	}
	if err != nil {
		resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import ID", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	if gen > 0 {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("generation"), gen)...)
	}
}
