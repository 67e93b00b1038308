package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// TestAccAgentDataSource_ReadsDeployedAgent: data.occ_agent reads an agent
// deployed in the same configuration, by namespace (as another workspace
// would) and by compute, and reports what the resource reports.
func TestAccAgentDataSource_ReadsDeployedAgent(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	config := kubeAgentConfig(env, "", anthropicDoc, "") + fmt.Sprintf(`
data "occ_agent" "by_namespace" {
  name       = "support"
  namespace  = %q
  depends_on = [occ_agent.a]
}
data "occ_agent" "by_compute" {
  name       = occ_agent.a.name
  compute    = occ_compute.k
  depends_on = [occ_agent.a]
}
`, env.ns)
	var checks []statecheck.StateCheck
	for _, ds := range []string{"data.occ_agent.by_namespace", "data.occ_agent.by_compute"} {
		checks = append(checks,
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("id"), knownvalue.StringExact(env.ns+"/support")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("status"), knownvalue.StringExact("active")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("endpoint"), knownvalue.StringExact(fmt.Sprintf("http://support.%s.svc:18789", env.ns))),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("activated_at"), knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`))),
			statecheck.CompareValuePairs(ds, tfjsonpath.New("revision_id"), "occ_agent.a", tfjsonpath.New("revision_id"), compare.ValuesSame()),
			statecheck.CompareValuePairs(ds, tfjsonpath.New("endpoint"), "occ_agent.a", tfjsonpath.New("endpoint"), compare.ValuesSame()),
		)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config, ConfigStateChecks: checks},
			// Read again at the next refresh (no pending change): the same.
			{Config: config, ConfigStateChecks: checks},
		},
	})
}

// TestAccAgentDataSource_MissingAgentIsNotFound: an agent that is not
// there fails the read with NOT_FOUND, naming the agent and the namespace;
// the data source takes exactly one of compute, namespace and host.
func TestAccAgentDataSource_MissingAgentIsNotFound(t *testing.T) {
	env := newKubeEnv(t)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: env.provider + `
data "occ_agent" "x" {
  name      = "ghost"
  namespace = "` + env.ns + `"
  host      = "10.0.0.5"
}`,
				ExpectError: regexp.MustCompile(`(?s)Invalid Attribute Combination.*namespace.*host`),
			},
			{
				Config: env.provider + `
data "occ_agent" "x" {
  name      = "ghost"
  namespace = "` + env.ns + `"
}`,
				ExpectError: mustRegexp(`NOT_FOUND: agent "ghost" not found in Kubernetes namespace "` + env.ns + `"`),
			},
		},
	})
}

// The data source and the resource's refresh say the same status for the
// same observation: the activated revision serves unless it drifted.
func TestAgentStatus_FollowsTheObservation(t *testing.T) {
	for _, tc := range []struct {
		obs     executor.Observed
		status  string
		drifted bool
	}{
		{executor.Observed{Exists: true}, "active", false},
		{executor.Observed{Exists: true, Drift: executor.DriftUnretired, DriftDetail: "x"}, "unretired: x", false},
		{executor.Observed{Exists: true, Drift: executor.DriftNetworkPolicy, DriftDetail: "y"}, "network policy missing: y", false},
		{executor.Observed{Exists: true, Drift: executor.DriftEdited, DriftDetail: "z"}, "drifted: z", true},
		{executor.Observed{Drift: executor.DriftGone, DriftDetail: "gone"}, "drifted: gone", true},
	} {
		status, drifted := observedStatus(tc.obs)
		if status != tc.status || drifted != tc.drifted {
			t.Errorf("%+v: got %q, %v; want %q, %v", tc.obs, status, drifted, tc.status, tc.drifted)
		}
	}
}

// A namespace or a host becomes the id an import would take, which the
// executors recognise; a host that is a single label is not a namespace.
func TestAgentDataSource_LookupIDs(t *testing.T) {
	for _, tc := range []struct {
		m                   agentDataModel
		lookupID, id, where string
	}{
		{agentDataModel{Name: types.StringValue("support"), Target: agentTarget{"namespace": types.StringValue("occ-acme"), "host": types.StringNull()}},
			"occ-acme/support", "occ-acme/support", `in Kubernetes namespace "occ-acme"`},
		{agentDataModel{Name: types.StringValue("support"), Target: agentTarget{"namespace": types.StringNull(), "host": types.StringValue("edge")}},
			"ssh://edge/support", "edge/support", `on SSH host "edge"`},
		{agentDataModel{Name: types.StringValue("support"), Target: agentTarget{"namespace": types.StringNull(), "host": types.StringValue("10.0.0.5:2222")}},
			"ssh://10.0.0.5:2222/support", "10.0.0.5:2222/support", `on SSH host "10.0.0.5:2222"`},
	} {
		lookupID, id, where := agentLookup(tc.m)
		if lookupID != tc.lookupID || id != tc.id || where != tc.where {
			t.Errorf("got %q %q %q; want %q %q %q", lookupID, id, where, tc.lookupID, tc.id, tc.where)
		}
		ex, name, err := (&Data{}).importExecutor(context.Background(), lookupID)
		if tc.m.Target.str("host").IsNull() {
			continue // the Kubernetes executor needs a cluster to be built
		}
		if err != nil || ex == nil || ex.Kind() != admission.KindSSH || name != "support" {
			t.Errorf("%s: executor %v, name %q, err %v", lookupID, ex, name, err)
		}
	}
}

// TestAccAgentDataSource_SSHByHost: on a systemd host, data.occ_agent reads
// the agent by HOST:PORT through the provider's ssh settings (its
// known_hosts file verifies the host, as an import does), and an agent
// that is not on the host is NOT_FOUND, naming it and the host.
func TestAccAgentDataSource_SSHByHost(t *testing.T) {
	env := newSSHEnv(t)
	host := fmt.Sprintf("127.0.0.1:%d", env.host.Port)
	config := env.config("", env.doc("anthropic/claude-sonnet-4-5", "")) + fmt.Sprintf(`
data "occ_agent" "by_host" {
  name       = "support"
  host       = %q
  depends_on = [occ_agent.a]
}
`, host)
	ds := "data.occ_agent.by_host"
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("id"), knownvalue.StringExact(host+"/support")),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("endpoint"), knownvalue.StringExact(fmt.Sprintf("http://127.0.0.1:%d", env.gatewayPort))),
					statecheck.CompareValuePairs(ds, tfjsonpath.New("revision_id"), "occ_agent.a", tfjsonpath.New("revision_id"), compare.ValuesSame()),
					statecheck.CompareValuePairs(ds, tfjsonpath.New("activated_at"), "occ_agent.a", tfjsonpath.New("activated_at"), compare.ValuesSame()),
				},
			},
			{
				Config: config + fmt.Sprintf(`
data "occ_agent" "ghost" {
  name = "ghost"
  host = %q
}
`, host),
				ExpectError: mustRegexp(`NOT_FOUND: agent "ghost" not found on SSH host "` + regexp.QuoteMeta(host) + `"`),
			},
		},
		CheckDestroy: env.destroyed,
	})
}
