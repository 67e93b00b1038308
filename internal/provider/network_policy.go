package provider

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The Kubernetes compute's network_policy: one NetworkPolicy per component
// of each Agent (render.NetworkPolicies), applied per Agent on every deploy
// and outside revision identity (admission.NetworkPolicy).

type networkPolicyModel struct {
	Enabled     types.Bool         `tfsdk:"enabled"`
	IngressFrom []networkPeerModel `tfsdk:"ingress_from"`
	ExtraEgress []egressRuleModel  `tfsdk:"extra_egress"`
	HTTPSEgress types.Bool         `tfsdk:"https_egress"`
	DNSNS       types.String       `tfsdk:"dns_namespace"`
}

type networkPeerModel struct {
	NamespaceSelector map[string]string `tfsdk:"namespace_selector"`
	PodSelector       map[string]string `tfsdk:"pod_selector"`
	IPBlock           *ipBlockModel     `tfsdk:"ip_block"`
}

type ipBlockModel struct {
	CIDR   string   `tfsdk:"cidr"`
	Except []string `tfsdk:"except"`
}

type egressRuleModel struct {
	To    []networkPeerModel `tfsdk:"to"`
	Ports []networkPortModel `tfsdk:"ports"`
}

type networkPortModel struct {
	Port     int64        `tfsdk:"port"`
	Protocol types.String `tfsdk:"protocol"`
}

func networkPolicySchema() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Network isolation of every Agent on this compute: one Kubernetes NetworkPolicy per component of each Agent, named like the component " +
			"(`NAME-gateway`, `NAME-harness`) and labelled with the Agent. Unset, it is enabled with the defaults: the gateway accepts connections on its port " +
			fmt.Sprintf("(%d) only from the Pods of the Agent's namespace labelled as its clients (`%s = \"true\"`, NAME the Agent's name); a dedicated Codex harness (port %d) only from its own Agent's gateway; ", render.GatewayPort, render.GatewayClientLabel("NAME"), render.AppServerPort) +
			"every component may reach the cluster DNS (UDP and TCP 53 on the Pods of `dns_namespace`) and TCP 443 anywhere (`https_egress`), with it each model endpoint the Agent's document names on another port " +
			"(a provider's `baseUrl`: TCP to that port, to the address alone when the host is an IP), the gateway its own harness, and a sandboxed " +
			"harness the sandbox driver's gateway namespace (the egress proxy). The policies are applied on every deploy, before the workloads, and are not part " +
			"of the revision: changing them gives no Agent a new revision and restarts nothing. They take effect only on a cluster whose CNI enforces NetworkPolicy " +
			"(Calico, Cilium, …); see Network isolation in the Revisions guide.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Render the policies. Default `true`; `false` deletes the Agents' policies on their next apply (without a new revision)."},
			"ingress_from": schema.ListNestedAttribute{Optional: true, NestedObject: networkPeerSchema(),
				Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				MarkdownDescription: "Who may connect to the gateway's port, replacing the default (the Pods of the Agent's namespace labelled `" + render.GatewayClientLabel("NAME") + " = \"true\"`). Each entry is a Kubernetes NetworkPolicyPeer: " +
					"`namespace_selector` and/or `pod_selector`, or an `ip_block`."},
			"https_egress": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Let every component reach TCP 443 on any address (model providers, channels), and each model endpoint its document names on another port. Default `true`; `false` removes both, and then every endpoint the Agents call (the model's `baseUrl`, channels, a proxy) must be named in `extra_egress`: the plan refuses an Agent whose model endpoint no `extra_egress` rule reaches."},
			"dns_namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(admission.DefaultDNSNamespace),
				Validators:          []validator.String{dnsLabel()},
				MarkdownDescription: "The namespace whose Pods serve the cluster DNS: DNS egress (UDP and TCP 53) reaches only them, not any Pod that listens on 53. Default `" + admission.DefaultDNSNamespace + "` (CoreDNS, kube-dns)."},
			"extra_egress": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Egress rules every component gets beside the defaults, shaped like a Kubernetes NetworkPolicyEgressRule: for example a model endpoint or proxy on a port other than 443.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"to": schema.ListNestedAttribute{Optional: true, NestedObject: networkPeerSchema(),
						MarkdownDescription: "The destinations (NetworkPolicyPeers). Unset: any destination."},
					"ports": schema.ListNestedAttribute{Optional: true,
						MarkdownDescription: "The destination ports. Unset: every port.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"port": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.Between(1, 65535)},
								MarkdownDescription: "The port number, 1 to 65535."},
							"protocol": schema.StringAttribute{Optional: true, Validators: []validator.String{protocol{}},
								MarkdownDescription: "`TCP` (default when unset), `UDP` or `SCTP`."},
						}},
					},
				}},
			},
		},
	}
}

func networkPeerSchema() schema.NestedAttributeObject {
	return schema.NestedAttributeObject{
		Validators: []validator.Object{networkPeer{}},
		Attributes: map[string]schema.Attribute{
			"namespace_selector": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelMap{}},
				MarkdownDescription: "Match labels of the namespaces whose Pods are meant (`{}`: every namespace). With `pod_selector`, the Pods matching both."},
			"pod_selector": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelMap{}},
				MarkdownDescription: "Match labels of the Pods meant (`{}`: every Pod), in the Agent's namespace unless `namespace_selector` is set."},
			"ip_block": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "An IP range, usually outside the cluster (Pod IPs are ephemeral). Not together with a selector.",
				Attributes: map[string]schema.Attribute{
					"cidr": schema.StringAttribute{Required: true, Validators: []validator.String{cidr{}},
						MarkdownDescription: "The range, in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`)."},
					"except": schema.ListAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.List{listvalidator.ValueStringsAre(cidr{})},
						MarkdownDescription: "Ranges inside `cidr` that are excluded, in CIDR notation."},
				},
			},
		},
	}
}

// networkPolicyFrom converts a known network_policy object; null is the
// default (enabled).
func networkPolicyFrom(ctx context.Context, o types.Object, diags *diag.Diagnostics) admission.NetworkPolicy {
	m, ok := decodeObject[networkPolicyModel](ctx, o, diags)
	if !ok {
		return admission.NetworkPolicy{}
	}
	np := admission.NetworkPolicy{Disabled: !m.Enabled.IsNull() && !m.Enabled.ValueBool(), IngressFrom: peersFrom(m.IngressFrom),
		NoHTTPSEgress: !m.HTTPSEgress.IsNull() && !m.HTTPSEgress.ValueBool(), DNSNamespace: m.DNSNS.ValueString()}
	for _, r := range m.ExtraEgress {
		rule := admission.EgressRule{To: peersFrom(r.To)}
		for _, p := range r.Ports {
			rule.Ports = append(rule.Ports, admission.NetworkPort{Port: int32(p.Port), Protocol: p.Protocol.ValueString()})
		}
		np.ExtraEgress = append(np.ExtraEgress, rule)
	}
	return np
}

func peersFrom(ms []networkPeerModel) []admission.NetworkPeer {
	var out []admission.NetworkPeer
	for _, m := range ms {
		p := admission.NetworkPeer{NamespaceSelector: m.NamespaceSelector, PodSelector: m.PodSelector}
		if m.IPBlock != nil {
			p.IPBlock = &admission.IPBlock{CIDR: m.IPBlock.CIDR, Except: m.IPBlock.Except}
		}
		out = append(out, p)
	}
	return out
}

// cidr accepts an IPv4 or IPv6 prefix in CIDR notation whose host bits
// are zero (what a NetworkPolicy's ipBlock takes).
type cidr struct{}

func (cidr) Description(context.Context) string {
	return "must be an IP range in CIDR notation, such as 10.0.0.0/8"
}
func (v cidr) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v cidr) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := checkCIDR(req.ConfigValue.ValueString()); msg != "" {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a CIDR", msg)
	}
}

// checkCIDR says what is wrong with a CIDR and how to fix it ("" when
// nothing is).
func checkCIDR(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Sprintf("%q is not an IP range in CIDR notation; write an address and a prefix length, such as 10.0.0.0/8 or 2001:db8::/32 (a single address is 192.0.2.7/32).", s)
	}
	if p.Masked() != p {
		return fmt.Sprintf("%q has host bits set past its prefix length; write the range's first address, %s.", s, p.Masked())
	}
	return ""
}

// networkPeer accepts a NetworkPolicyPeer: at least one of the selectors
// or an ip_block, never an ip_block with a selector, and an ip_block's
// except ranges strictly inside its cidr.
type networkPeer struct{}

func (networkPeer) Description(context.Context) string {
	return "must set namespace_selector and/or pod_selector, or ip_block alone"
}
func (v networkPeer) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v networkPeer) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	set := func(name string) bool { a, ok := attrs[name]; return ok && !a.IsNull() }
	selector := set("namespace_selector") || set("pod_selector")
	switch {
	case !selector && !set("ip_block"):
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: an empty network peer",
			"A peer must say whom it means: set pod_selector and/or namespace_selector (pod_selector = {} is every Pod of the namespace, namespace_selector = {} every Pod of the cluster), or ip_block = { cidr = \"…\" }.")
		return
	case selector && set("ip_block"):
		addAttrError(&resp.Diagnostics, req.Path.AtName("ip_block"), "INVALID_REQUEST: ip_block together with a selector",
			"Kubernetes takes a peer's ip_block alone; move the ip_block into a peer of its own (the peers of a list are alternatives).")
		return
	}
	block, ok := attrs["ip_block"].(types.Object)
	if !ok || block.IsNull() || block.IsUnknown() {
		return
	}
	c, ok := block.Attributes()["cidr"].(types.String)
	if !ok || c.IsNull() || c.IsUnknown() || checkCIDR(c.ValueString()) != "" {
		return
	}
	outer := netip.MustParsePrefix(c.ValueString())
	except, ok := block.Attributes()["except"].(types.List)
	if !ok || except.IsNull() || except.IsUnknown() {
		return
	}
	for i, e := range except.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() || checkCIDR(s.ValueString()) != "" {
			continue
		}
		if inner := netip.MustParsePrefix(s.ValueString()); !strictlyInside(inner, outer) {
			addAttrError(&resp.Diagnostics, req.Path.AtName("ip_block").AtName("except").AtListIndex(i), "INVALID_REQUEST: an except range outside its cidr",
				fmt.Sprintf("%s is not strictly inside cidr %s; Kubernetes refuses such an ipBlock. Remove it, or write a smaller range inside %s.", inner, outer, outer))
		}
	}
}

func strictlyInside(inner, outer netip.Prefix) bool {
	return inner.Addr().Is4() == outer.Addr().Is4() && inner.Bits() > outer.Bits() && outer.Contains(inner.Addr())
}

// protocol accepts a NetworkPolicy port protocol.
type protocol struct{}

func (protocol) Description(context.Context) string {
	return "must be one of " + quotedList(admission.NetworkProtocols)
}
func (v protocol) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v protocol) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	for _, ok := range admission.NetworkProtocols {
		if s == ok {
			return
		}
	}
	addAttrError(&resp.Diagnostics, req.Path, fmt.Sprintf("INVALID_REQUEST: unsupported protocol %q", s),
		fmt.Sprintf("Use one of %s (upper case), or leave protocol unset for TCP.", quotedList(admission.NetworkProtocols)))
}

var (
	_ validator.String = cidr{}
	_ validator.Object = networkPeer{}
	_ validator.String = protocol{}
)
