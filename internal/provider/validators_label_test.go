package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The name validators are Kubernetes' own (apimachinery's validation):
// an RFC 1123 label for namespaces and Secrets, an RFC 1035 label (a
// letter first) for an agent's name, at most 63 characters each.
func TestLabelValidators_AreKubernetesOwn(t *testing.T) {
	for _, c := range []struct {
		value            string
		dns1123, dns1035 bool
	}{
		{"support-bot", true, true},
		{"1support", true, false},
		{"Support", false, false},
		{"-support", false, false},
		{"support-", false, false},
		{"sup_port", false, false},
		{strings.Repeat("a", 63), true, true},
		{strings.Repeat("a", 64), false, false},
		{"", false, false},
	} {
		for _, v := range []struct {
			name string
			l    label
			want bool
		}{{"dnsLabel", dnsLabel(), c.dns1123}, {"agentName", agentName().label, c.dns1035}} {
			resp := &validator.StringResponse{}
			v.l.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("name"), ConfigValue: types.StringValue(c.value)}, resp)
			if got := !resp.Diagnostics.HasError(); got != v.want {
				t.Errorf("%s(%q) accepts %v, want %v", v.name, c.value, got, v.want)
			}
		}
		if got := isDNSLabel(c.value); got != c.dns1123 {
			t.Errorf("isDNSLabel(%q) = %v, want %v", c.value, got, c.dns1123)
		}
	}
}
