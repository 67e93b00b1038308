package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var npPath = path.Root("kubernetes").AtName("network_policy").AtName("ingress_from").AtListIndex(0)

// oneError checks that diags hold exactly one error, at the attribute,
// whose text names the attribute and says each of fix.
func oneError(t *testing.T, what string, diags diag.Diagnostics, at path.Path, fix ...string) {
	t.Helper()
	if len(diags) != 1 || !diags.HasError() {
		t.Fatalf("%s: diagnostics %v, want one error", what, diags)
	}
	d := diags[0]
	withPath, ok := d.(diag.DiagnosticWithPath)
	if !ok || !withPath.Path().Equal(at) {
		t.Errorf("%s: error not at %s: %v", what, at, d)
	}
	text := d.Summary() + " " + d.Detail()
	if !strings.HasPrefix(d.Summary(), "INVALID_REQUEST: ") || !strings.Contains(text, at.String()) {
		t.Errorf("%s: %q must start with the class and name %s", what, text, at)
	}
	for _, f := range fix {
		if !strings.Contains(text, f) {
			t.Errorf("%s: %q does not say %q", what, text, f)
		}
	}
}

func TestNetworkPolicy_CIDRValidator(t *testing.T) {
	at := npPath.AtName("ip_block").AtName("cidr")
	for _, ok := range []string{"10.0.0.0/8", "192.0.2.7/32", "0.0.0.0/0", "2001:db8::/32", "::/0"} {
		resp := &validator.StringResponse{}
		cidr{}.ValidateString(context.Background(), validator.StringRequest{Path: at, ConfigValue: types.StringValue(ok)}, resp)
		if resp.Diagnostics.HasError() {
			t.Errorf("%q refused: %v", ok, resp.Diagnostics)
		}
	}
	for bad, fix := range map[string]string{
		"10.0.0.0":       "CIDR notation",
		"10.0.0.0/33":    "CIDR notation",
		"ten/8":          "such as 10.0.0.0/8",
		"10.1.2.3/8":     "10.0.0.0/8", // host bits: the fix names the range's first address
		"2001:db8::1/32": "2001:db8::/32",
	} {
		resp := &validator.StringResponse{}
		cidr{}.ValidateString(context.Background(), validator.StringRequest{Path: at, ConfigValue: types.StringValue(bad)}, resp)
		oneError(t, bad, resp.Diagnostics, at, fix)
	}
	resp := &validator.StringResponse{}
	cidr{}.ValidateString(context.Background(), validator.StringRequest{Path: at, ConfigValue: types.StringUnknown()}, resp)
	if resp.Diagnostics.HasError() {
		t.Error("an unknown CIDR is judged at plan, not before")
	}
}

func stringMapOf(kv map[string]string) types.Map {
	elems := map[string]attr.Value{}
	for k, v := range kv {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

func TestNetworkPolicy_MatchLabelsValidator(t *testing.T) {
	at := npPath.AtName("pod_selector")
	for _, ok := range []map[string]string{{}, {"app": "web"}, {"example.com/team": "a.b-c_d", "tier": ""}} {
		resp := &validator.MapResponse{}
		labelMap{}.ValidateMap(context.Background(), validator.MapRequest{Path: at, ConfigValue: stringMapOf(ok)}, resp)
		if resp.Diagnostics.HasError() {
			t.Errorf("%v refused: %v", ok, resp.Diagnostics)
		}
	}
	cases := []struct {
		labels map[string]string
		key    string
		fix    string
	}{
		{map[string]string{"bad key": "x"}, "bad key", "not a Kubernetes label key"},
		{map[string]string{"-app": "x"}, "-app", "example.com/team"},
		{map[string]string{"app": "has space"}, "app", "not a Kubernetes label value"},
		{map[string]string{"app": strings.Repeat("v", 64)}, "app", "63"},
	}
	for _, tc := range cases {
		resp := &validator.MapResponse{}
		labelMap{}.ValidateMap(context.Background(), validator.MapRequest{Path: at, ConfigValue: stringMapOf(tc.labels)}, resp)
		oneError(t, tc.key, resp.Diagnostics, at.AtMapKey(tc.key), tc.fix)
	}
}

func peerObject(ns, pod map[string]string, cidrValue string, except ...string) types.Object {
	blockType := map[string]attr.Type{"cidr": types.StringType, "except": types.ListType{ElemType: types.StringType}}
	peerType := map[string]attr.Type{"namespace_selector": types.MapType{ElemType: types.StringType}, "pod_selector": types.MapType{ElemType: types.StringType}, "ip_block": types.ObjectType{AttrTypes: blockType}}
	sel := func(m map[string]string) attr.Value {
		if m == nil {
			return types.MapNull(types.StringType)
		}
		return stringMapOf(m)
	}
	block := types.ObjectNull(blockType)
	if cidrValue != "" {
		ex := types.ListNull(types.StringType)
		if except != nil {
			var vs []attr.Value
			for _, e := range except {
				vs = append(vs, types.StringValue(e))
			}
			ex = types.ListValueMust(types.StringType, vs)
		}
		block = types.ObjectValueMust(blockType, map[string]attr.Value{"cidr": types.StringValue(cidrValue), "except": ex})
	}
	return types.ObjectValueMust(peerType, map[string]attr.Value{"namespace_selector": sel(ns), "pod_selector": sel(pod), "ip_block": block})
}

func TestNetworkPolicy_PeerValidator(t *testing.T) {
	validate := func(o types.Object) diag.Diagnostics {
		resp := &validator.ObjectResponse{}
		networkPeer{}.ValidateObject(context.Background(), validator.ObjectRequest{Path: npPath, ConfigValue: o}, resp)
		return resp.Diagnostics
	}
	for name, ok := range map[string]types.Object{
		"pods of the namespace":   peerObject(nil, map[string]string{}, ""),
		"namespaces and pods":     peerObject(map[string]string{"team": "edge"}, map[string]string{"app": "lb"}, ""),
		"an ip block":             peerObject(nil, nil, "10.0.0.0/8", "10.1.0.0/16", "10.2.3.4/32"),
		"an ipv6 block":           peerObject(nil, nil, "2001:db8::/32", "2001:db8:1::/48"),
		"a malformed cidr (cidr)": peerObject(nil, nil, "nope"), // the cidr validator says it
	} {
		if d := validate(ok); d.HasError() {
			t.Errorf("%s refused: %v", name, d)
		}
	}
	oneError(t, "empty", validate(peerObject(nil, nil, "")), npPath, "pod_selector", "ip_block")
	oneError(t, "both", validate(peerObject(nil, map[string]string{"app": "x"}, "10.0.0.0/8")), npPath.AtName("ip_block"), "peer of its own")
	oneError(t, "outside", validate(peerObject(nil, nil, "10.0.0.0/8", "192.168.0.0/16")), npPath.AtName("ip_block").AtName("except").AtListIndex(0), "strictly inside cidr 10.0.0.0/8")
	oneError(t, "equal", validate(peerObject(nil, nil, "10.0.0.0/8", "10.0.0.0/16", "10.0.0.0/8")), npPath.AtName("ip_block").AtName("except").AtListIndex(1), "strictly inside")
	oneError(t, "family", validate(peerObject(nil, nil, "10.0.0.0/8", "2001:db8::/32")), npPath.AtName("ip_block").AtName("except").AtListIndex(0), "strictly inside")
}

func TestNetworkPolicy_ProtocolValidator(t *testing.T) {
	at := path.Root("kubernetes").AtName("network_policy").AtName("extra_egress").AtListIndex(0).AtName("ports").AtListIndex(0).AtName("protocol")
	for _, ok := range []string{"TCP", "UDP", "SCTP"} {
		resp := &validator.StringResponse{}
		protocol{}.ValidateString(context.Background(), validator.StringRequest{Path: at, ConfigValue: types.StringValue(ok)}, resp)
		if resp.Diagnostics.HasError() {
			t.Errorf("%s refused", ok)
		}
	}
	resp := &validator.StringResponse{}
	protocol{}.ValidateString(context.Background(), validator.StringRequest{Path: at, ConfigValue: types.StringValue("tcp")}, resp)
	oneError(t, "tcp", resp.Diagnostics, at, `"TCP"`, "unset for TCP")
}
