package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The Kubernetes compute's service: how each Agent's gateway Service is
// exposed (admission.Exposure, render.ExposeService), applied on every
// deploy and outside revision identity.

type serviceExposureModel struct {
	Type                     types.String `tfsdk:"type"`
	Annotations              types.Map    `tfsdk:"annotations"`
	LoadBalancerSourceRanges types.List   `tfsdk:"load_balancer_source_ranges"`
	WaitForLoadBalancer      types.Bool   `tfsdk:"wait_for_load_balancer"`
}

func serviceExposureSchema() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:   true,
		Validators: []validator.Object{loadBalancerOnly{}},
		MarkdownDescription: fmt.Sprintf("How each Agent's gateway Service (named like the Agent, port %d) is exposed. Unset, it is a `ClusterIP` Service that only the cluster reaches, "+
			"and `endpoint` is its in-cluster URL. These settings are applied on every deploy and are not part of the revision: changing them gives no Agent a new revision "+
			"and restarts nothing (the plan shows the same `revision_id`). See Exposure in the Revisions guide.", render.GatewayPort),
		Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(admission.ServiceClusterIP),
				Validators: []validator.String{oneOfValues(admission.ServiceTypes...)},
				MarkdownDescription: "`ClusterIP` (default) or `LoadBalancer`. A `LoadBalancer` Service gets its address from the cluster's load balancer controller; " +
					"`endpoint` is then `http://ADDRESS:" + fmt.Sprint(render.GatewayPort) + "`. `NodePort` is not offered: its address is a node's, which the provider cannot report truthfully."},
			"annotations": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{annotationMap{}},
				MarkdownDescription: "Annotations on the Service, for example a cloud's internal load balancer " +
					"(`service.beta.kubernetes.io/aws-load-balancer-internal`, `networking.gke.io/load-balancer-type`, `service.beta.kubernetes.io/azure-load-balancer-internal`). " +
					"A key removed here is removed from the Service; annotations other controllers set are left alone. Keys under `" + render.PlatformLabelPrefix + "` are the platform's."},
			"load_balancer_source_ranges": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Validators:          []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(cidr{})},
				MarkdownDescription: "The client ranges a `LoadBalancer` admits (CIDR notation), where the cloud's controller enforces them. Only with `type = \"LoadBalancer\"`."},
			"wait_for_load_balancer": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "With `type = \"LoadBalancer\"`, apply waits after activation, within its deadline, until the load balancer has an address, " +
					"so that `endpoint` is that address; a load balancer that gets none fails the apply with `DEADLINE_EXCEEDED` (the revision serves inside the cluster). " +
					"`false` returns at activation; `endpoint` is then the in-cluster URL until a refresh finds the address. Default `true`."},
		},
	}
}

// exposureFrom converts a known service object; null is the default
// (ClusterIP).
func exposureFrom(ctx context.Context, o types.Object, diags *diag.Diagnostics) admission.Exposure {
	m, ok := decodeObject[serviceExposureModel](ctx, o, diags)
	if !ok {
		return admission.Exposure{}
	}
	x := admission.Exposure{NoWait: !m.WaitForLoadBalancer.IsNull() && !m.WaitForLoadBalancer.ValueBool()}
	if t := m.Type.ValueString(); t != admission.ServiceClusterIP {
		x.Type = t
	}
	if !m.Annotations.IsNull() {
		diags.Append(m.Annotations.ElementsAs(ctx, &x.Annotations, false)...)
	}
	if !m.LoadBalancerSourceRanges.IsNull() {
		diags.Append(m.LoadBalancerSourceRanges.ElementsAs(ctx, &x.SourceRanges, false)...)
	}
	return x
}

// annotationMap accepts a map of Kubernetes annotations: every key a
// qualified name, as apimachinery validates it, and none of the
// platform's (render.PlatformLabel), whose annotations on the Service
// carry the activated revision.
type annotationMap struct{}

func (annotationMap) Description(context.Context) string {
	return "keys must be Kubernetes annotation keys (an optional DNS subdomain prefix and '/', then a name), outside " + render.PlatformLabelPrefix
}
func (v annotationMap) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (annotationMap) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, key := range slices.Sorted(maps.Keys(req.ConfigValue.Elements())) {
		at := req.Path.AtMapKey(key)
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
			addAttrError(&resp.Diagnostics, at, "INVALID_REQUEST: not a valid annotation key",
				fmt.Sprintf("key %q is not a Kubernetes annotation key: %s. Use a name of at most 63 letters, digits, '-', '_' and '.' that starts and ends with a letter or digit, "+
					"optionally after a DNS subdomain prefix and '/', such as \"service.beta.kubernetes.io/aws-load-balancer-internal\".", key, strings.Join(errs, "; ")))
			continue
		}
		if render.PlatformLabel(key) {
			addAttrError(&resp.Diagnostics, at, fmt.Sprintf("INVALID_REQUEST: %q is the platform's annotation", key),
				fmt.Sprintf("keys under %s are the platform's: the Service's own annotations record the activated revision. Remove %q from %s, or use a key of your own.",
					render.PlatformLabelPrefix, key, req.Path))
		}
	}
}

// loadBalancerOnly refuses load balancer settings on a ClusterIP Service,
// where Kubernetes ignores them.
type loadBalancerOnly struct{}

func (loadBalancerOnly) Description(context.Context) string {
	return "load_balancer_source_ranges needs type = \"LoadBalancer\""
}
func (v loadBalancerOnly) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (loadBalancerOnly) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	typ, _ := attrs["type"].(types.String)
	if typ.IsUnknown() || (!typ.IsNull() && typ.ValueString() == admission.ServiceLoadBalancer) {
		return
	}
	if r, ok := attrs["load_balancer_source_ranges"].(types.List); ok && !r.IsNull() {
		addAttrError(&resp.Diagnostics, req.Path.AtName("load_balancer_source_ranges"), "INVALID_REQUEST: source ranges need a load balancer",
			fmt.Sprintf("a %s Service has no load balancer to restrict; set type = \"LoadBalancer\" in %s, or remove load_balancer_source_ranges.", admission.ServiceClusterIP, req.Path))
	}
}
