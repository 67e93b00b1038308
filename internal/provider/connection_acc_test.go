package provider

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// decoyAPIServer listens on loopback and counts the connections made to
// it; KUBECONFIG names it, so it is what a fallback to the environment
// would reach: another cluster.
func decoyAPIServer(t *testing.T) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var hits atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: decoy, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: decoy, user: {token: decoy}}]
contexts: [{name: decoy, context: {cluster: decoy, user: decoy, namespace: decoy}}]
current-context: decoy
`, l.Addr())
	path := filepath.Join(t.TempDir(), "decoy-kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	return &hits
}

// Issue 27: a provider block whose kubernetes setting is known only at
// apply (here config_path, through timestamp(), which Terraform learns
// at apply) makes no connection during the plan: the refresh of the
// agent, its compute and its credential source keeps their state with a
// warning, and nothing reaches KUBECONFIG's cluster (a decoy on loopback
// that counts connections); the data source that must answer now fails
// naming the setting; the apply, which knows the connection, works
// against the cluster it names. Before, the unknown path read as empty
// and the client fell back to KUBECONFIG.
func TestAccProvider_UnknownConnectionNeverFallsBack(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.NamespacedIdentity(ctx, ns, kube.RequiredRules)
	if err != nil {
		t.Fatal(err)
	}
	hits := decoyAPIServer(t)
	known := kubeEnv{cluster: c, ns: ns, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, id.KubeconfigPath)}
	// timestamp() is unknown during a plan and known at apply: the path
	// is the same, and the plan cannot know it.
	late := known
	late.provider = fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = "%s${substr(timestamp(), 0, 0)}" }
}
`, id.KubeconfigPath)
	known.secret(t, "llm", "api-key", testSentinel)
	noDecoy := func(*terraform.State) error {
		if n := hits.Load(); n > 0 {
			return fmt.Errorf("%d connections reached the cluster KUBECONFIG names", n)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: faultAgentConfig(known, "", fixedDoc, "support"), Check: noDecoy},
			{
				Config:           faultAgentConfig(late, "", fixedDoc, "support"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: resource.ComposeTestCheckFunc(noDecoy,
					resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
					resource.TestCheckResourceAttr("occ_agent.a", "revision", "1")),
			},
			{
				Config: faultAgentConfig(late, "", fixedDoc, "support") + `
data "occ_agent" "read" {
  name    = occ_agent.a.name
  compute = occ_compute.k
}`,
				ExpectError: regexp.MustCompile(`UNAVAILABLE: the provider's kubernetes connection is not known until apply[\s\S]*kubernetes\.config_path[\s\S]*never falls back`),
			},
			{Config: faultAgentConfig(known, "", fixedDoc, "support"), Check: noDecoy},
		},
	})
	if n := hits.Load(); n > 0 {
		t.Errorf("%d connections reached the cluster KUBECONFIG names", n)
	}
}
