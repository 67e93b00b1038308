// Command noopprovider is the baseline of scripts/bench-plan.sh: a provider
// named "noop" whose resources have exactly the schemas of the occ
// provider's resources (same attributes and types) but do no work at all:
// no validators, no plan modifiers, no defaults, no ModifyPlan, no
// admission. The difference between planning N occ_agent and N noop_agent
// is what the occ provider's own checks cost, over what the plugin
// framework and Terraform spend on the same shapes anyway.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	occ "github.com/occ-platform/terraform-provider-occ/internal/provider"
)

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return noopProvider{} }, providerserver.ServeOpts{
		Address:         "registry.terraform.io/occ-platform/noop",
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err)
	}
}

type noopProvider struct{}

func (noopProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "noop"
}
func (noopProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}
func (noopProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}
func (noopProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
func (noopProvider) Functions(context.Context) []func() function.Function       { return nil }

// Resources mirrors every occ resource as noop_<name>.
func (noopProvider) Resources(ctx context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, factory := range occ.New("bench", "bench")().Resources(ctx) {
		r := factory()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "noop"}, &meta)
		var sch resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sch)
		nr := noopResource{name: meta.TypeName, schema: schema.Schema{Attributes: stripAll(sch.Schema.Attributes)}}
		out = append(out, func() resource.Resource { return nr })
	}
	return out
}

func stripAll(attrs map[string]schema.Attribute) map[string]schema.Attribute {
	out := make(map[string]schema.Attribute, len(attrs))
	for k, a := range attrs {
		out[k] = strip(a)
	}
	return out
}

// strip keeps an attribute's type and mode and drops all behaviour.
func strip(a schema.Attribute) schema.Attribute {
	req, opt, comp := a.IsRequired(), a.IsOptional(), a.IsComputed()
	switch t := a.(type) {
	case schema.StringAttribute:
		return schema.StringAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: t.Sensitive, WriteOnly: t.WriteOnly}
	case schema.BoolAttribute:
		return schema.BoolAttribute{Required: req, Optional: opt, Computed: comp}
	case schema.Int64Attribute:
		return schema.Int64Attribute{Required: req, Optional: opt, Computed: comp}
	case schema.ListAttribute:
		return schema.ListAttribute{Required: req, Optional: opt, Computed: comp, ElementType: t.ElementType}
	case schema.SetAttribute:
		return schema.SetAttribute{Required: req, Optional: opt, Computed: comp, ElementType: t.ElementType}
	case schema.MapAttribute:
		return schema.MapAttribute{Required: req, Optional: opt, Computed: comp, ElementType: t.ElementType}
	case schema.ObjectAttribute:
		return schema.ObjectAttribute{Required: req, Optional: opt, Computed: comp, AttributeTypes: t.AttributeTypes}
	case schema.SingleNestedAttribute:
		return schema.SingleNestedAttribute{Required: req, Optional: opt, Computed: comp, Attributes: stripAll(t.Attributes)}
	case schema.MapNestedAttribute:
		return schema.MapNestedAttribute{Required: req, Optional: opt, Computed: comp,
			NestedObject: schema.NestedAttributeObject{Attributes: stripAll(t.NestedObject.Attributes)}}
	default:
		// The timeouts attribute (a custom nested type) and anything else:
		// kept as it is, it has no plan-time behaviour.
		return a
	}
}

type noopResource struct {
	name   string
	schema schema.Schema
}

func (r noopResource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = r.name
}
func (r noopResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.schema
}

// Create stores the plan with every unknown computed value made null.
func (r noopResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	v, err := tftypes.Transform(req.Plan.Raw, func(_ *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if !v.IsKnown() {
			return tftypes.NewValue(v.Type(), nil), nil
		}
		return v, nil
	})
	if err != nil {
		resp.Diagnostics.AddError("noop", err.Error())
		return
	}
	resp.State = tfsdk.State{Schema: r.schema, Raw: v}
}
func (r noopResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}
func (r noopResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.State.Raw = req.Plan.Raw
}
func (r noopResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
