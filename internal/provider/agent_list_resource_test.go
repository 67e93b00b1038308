package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// TestAgentList_ConfigChecks: a list block names exactly one target, a
// port only with a host, and a TCP port; each refusal names its attribute.
func TestAgentList_ConfigChecks(t *testing.T) {
	s, n := types.StringValue, types.StringNull()
	cases := []struct {
		name string
		in   agentListConfigModel
		want string // "" for accepted
	}{
		{"namespace", agentListConfigModel{"namespace": s("occ-acme"), "host": n, "port": types.Int64Null()}, ""},
		{"host", agentListConfigModel{"namespace": n, "host": s("10.0.0.5"), "port": types.Int64Null()}, ""},
		{"host and port", agentListConfigModel{"namespace": n, "host": s("10.0.0.5"), "port": types.Int64Value(2222)}, ""},
		{"unknown waits", agentListConfigModel{"namespace": types.StringUnknown(), "host": s("10.0.0.5"), "port": types.Int64Null()}, ""},
		{"both", agentListConfigModel{"namespace": s("occ-acme"), "host": s("10.0.0.5"), "port": types.Int64Null()}, "namespace and host are both set"},
		{"neither", agentListConfigModel{"namespace": n, "host": n, "port": types.Int64Null()}, "nothing to list"},
		{"port with namespace", agentListConfigModel{"namespace": s("occ-acme"), "host": n, "port": types.Int64Value(22)}, "port is for an SSH host"},
		{"empty namespace", agentListConfigModel{"namespace": s(""), "host": n, "port": types.Int64Null()}, "namespace is empty"},
		{"empty host", agentListConfigModel{"namespace": n, "host": s(""), "port": types.Int64Null()}, "host is empty"},
		{"port out of range", agentListConfigModel{"namespace": n, "host": s("10.0.0.5"), "port": types.Int64Value(0)}, "port is not a TCP port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var diags diag.Diagnostics
			c.in.check(&diags)
			switch {
			case c.want == "" && diags.HasError():
				t.Fatalf("refused: %v", diags)
			case c.want != "" && (!diags.HasError() || !containsSummary(diags, c.want)):
				t.Fatalf("diagnostics %v, want one saying %q", diags, c.want)
			}
		})
	}
}

func containsSummary(diags diag.Diagnostics, s string) bool {
	for _, d := range diags {
		if d.Summary() == "INVALID_REQUEST: "+s {
			return true
		}
	}
	return false
}

// TestAgentList_Target: the target handed to the executor's List is the
// namespace, or HOST / HOST:PORT (IPv6 bracketed), and each agent found
// gets the identity an import block takes.
func TestAgentList_Target(t *testing.T) {
	s, n := types.StringValue, types.StringNull()
	cases := []struct {
		name     string
		in       agentListConfigModel
		kind     string
		where    string
		identity agentIdentityModel
	}{
		{"namespace", agentListConfigModel{"namespace": s("occ-acme"), "host": n, "port": types.Int64Null()}, admission.KindKubernetes, "occ-acme", kubeIdentity("occ-acme", "support")},
		{"host", agentListConfigModel{"namespace": n, "host": s("10.0.0.5"), "port": types.Int64Null()}, admission.KindSSH, "10.0.0.5", sshIdentity("10.0.0.5", 22, "support")},
		{"host port 22", agentListConfigModel{"namespace": n, "host": s("edge"), "port": types.Int64Value(22)}, admission.KindSSH, "edge", sshIdentity("edge", 22, "support")},
		{"host port", agentListConfigModel{"namespace": n, "host": s("127.0.0.1"), "port": types.Int64Value(2222)}, admission.KindSSH, "127.0.0.1:2222", sshIdentity("127.0.0.1", 2222, "support")},
		{"ipv6", agentListConfigModel{"namespace": n, "host": s("fd00::5"), "port": types.Int64Null()}, admission.KindSSH, "[fd00::5]", sshIdentity("fd00::5", 22, "support")},
		{"ipv6 port", agentListConfigModel{"namespace": n, "host": s("fd00::5"), "port": types.Int64Value(2200)}, admission.KindSSH, "[fd00::5]:2200", sshIdentity("fd00::5", 2200, "support")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			on, where, identity := listTarget(c.in)
			kind := on.Kind
			if kind != c.kind || where != c.where || !identity("support").equal(c.identity) {
				t.Fatalf("target() = %s %q %+v, want %s %q %+v", kind, where, identity("support"), c.kind, c.where, c.identity)
			}
		})
	}
}
