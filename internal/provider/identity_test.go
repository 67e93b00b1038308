package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestAgentIdentity_ImportIDRoundTrip: the import id an identity names is
// read back by the executors' id parsers (importOrder) into the same
// identity, for both kinds, default and other ports, IPv6 and a host that
// is a single DNS label (written as ssh:// so it is not a namespace).
func TestAgentIdentity_ImportIDRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   agentIdentityModel
		id   string
		want agentIdentityModel
	}{
		{"kubernetes", kubeIdentity("occ-acme", "support"), "occ-acme/support", kubeIdentity("occ-acme", "support")},
		{"ssh default port", agentIdentityModel{Name: types.StringValue("support"), Target: agentTarget{"host": types.StringValue("10.0.0.5"), "port": types.Int64Null()}},
			"ssh://10.0.0.5/support", sshIdentity("10.0.0.5", 22, "support")},
		{"ssh other port", sshIdentity("127.0.0.1", 2222, "support"), "ssh://127.0.0.1:2222/support", sshIdentity("127.0.0.1", 2222, "support")},
		{"ssh dotless host", sshIdentity("edge", 22, "support"), "ssh://edge/support", sshIdentity("edge", 22, "support")},
		{"ssh ipv6", sshIdentity("fd00::5", 22, "support"), "ssh://[fd00::5]/support", sshIdentity("fd00::5", 22, "support")},
		{"ssh ipv6 other port", sshIdentity("fd00::5", 2200, "support"), "ssh://[fd00::5]:2200/support", sshIdentity("fd00::5", 2200, "support")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := c.in.importID()
			if err != nil || id != c.id {
				t.Fatalf("importID() = %q, %v; want %q", id, err, c.id)
			}
			got, ok := agentIdentityOf(context.Background(), types.ObjectNull(computeRefType()), id, "")
			if !ok || !got.equal(c.want) {
				t.Fatalf("identity of %q = %+v (%v), want %+v", id, got, ok, c.want)
			}
		})
	}
}

// TestAgentIdentity_Refusals: an identity that names no place, both
// places, a port without a host or a port out of range is refused, naming
// the identity attribute to fix.
func TestAgentIdentity_Refusals(t *testing.T) {
	name := types.StringValue("support")
	cases := []struct {
		name string
		in   agentIdentityModel
		want string
	}{
		{"no name", agentIdentityModel{Name: types.StringNull(), Target: agentTarget{"namespace": types.StringValue("occ-acme"), "host": types.StringNull(), "port": types.Int64Null()}}, "identity.name must be set"},
		{"neither", agentIdentityModel{Name: name, Target: agentTarget{"namespace": types.StringNull(), "host": types.StringNull(), "port": types.Int64Null()}}, "must set namespace"},
		{"both", agentIdentityModel{Name: name, Target: agentTarget{"namespace": types.StringValue("occ-acme"), "host": types.StringValue("10.0.0.5"), "port": types.Int64Null()}}, "both namespace and host"},
		{"port with namespace", agentIdentityModel{Name: name, Target: agentTarget{"namespace": types.StringValue("occ-acme"), "host": types.StringNull(), "port": types.Int64Value(22)}}, "identity.port is for an SSH host"},
		{"port zero", agentIdentityModel{Name: name, Target: agentTarget{"namespace": types.StringNull(), "host": types.StringValue("10.0.0.5"), "port": types.Int64Value(0)}}, "identity.port 0 is not a TCP port"},
		{"port too big", agentIdentityModel{Name: name, Target: agentTarget{"namespace": types.StringNull(), "host": types.StringValue("10.0.0.5"), "port": types.Int64Value(70000)}}, "identity.port 70000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.in.importID()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("importID() error = %v, want it to say %q", err, c.want)
			}
		})
	}
}
