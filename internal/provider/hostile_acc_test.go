package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestAccAgent_HostileNeighbourKubernetes (issue 27), through the
// Terraform CLI under exactly the documented ClusterRoles: a compute
// creates its namespace; another identity then fills it with an object of
// every kind and name the provider derives for agent "web" (and a
// StatefulSet, a Job and an Ingress named like its gateway). Creating
// agent web fails with RESOURCE_CONFLICT naming the first foreign object
// and the way out, writing nothing; agent api is created and destroyed
// beside them; throughout, every foreign object keeps its resourceVersion
// (its generation and writers, for a controller's kind). Destroying the
// compute keeps the namespace, which holds the neighbour's objects (the
// warning's words are TestOwnership_HostileNeighbourUntouched's).
func TestAccAgent_HostileNeighbourKubernetes(t *testing.T) {
	c := kubeenv.Shared(t)
	ctx := context.Background()
	id := documentedRoles(t, c)
	env := kubeEnv{cluster: c, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, id.KubeconfigPath)}
	env.ns = env.freshNamespace(t)
	ns := env.ns
	t.Setenv("TF_VAR_key", testSentinel)
	const model = "anthropic/claude-sonnet-4-5"
	base := documentedRolesConfig(env, model, "")
	agent := func(name string) string { return documentedRolesConfig(env, model, name) }
	objects := kubeenv.NeighbourObjects(ns, "web")
	keys := slices.Sorted(maps.Keys(objects))
	var before map[string]string
	untouched := func() error {
		after, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
		if err != nil {
			return fmt.Errorf("a neighbour's object is gone: %w", err)
		}
		for _, k := range keys {
			if after[k] != before[k] {
				return fmt.Errorf("the neighbour's %s changed: %s, then %s", k, before[k], after[k])
			}
		}
		return nil
	}
	nothingOf := func(agent string) error {
		left, err := kubeenv.AgentLeftovers(ctx, c.Clientset, ns, agent)
		if err != nil || len(left) > 0 {
			return fmt.Errorf("agent %s left %v (%v)", agent, left, err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			got, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				return fmt.Errorf("the namespace holding the neighbour's objects was deleted with the compute: %v", err)
			}
			return untouched()
		},
		Steps: []resource.TestStep{
			{
				// The namespace, then the neighbour moves in.
				Config: base,
				Check: func(*terraform.State) error {
					neighbour, err := c.NamespacedIdentity(ctx, ns, nil)
					if err != nil {
						return err
					}
					for _, k := range keys {
						if _, err := kubeenv.Plant(ctx, neighbour.Clientset, objects[k]); err != nil {
							return err
						}
					}
					before, err = kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
					return err
				},
			},
			{
				Config: agent("web"),
				ExpectError: regexp.MustCompile(fmt.Sprintf(`(?s)RESOURCE_CONFLICT.*Secret %s/web-gateway-token is not agent\s+"web"'s.*Rename\s+this\s+agent`,
					regexp.QuoteMeta(ns))),
			},
			{
				PreConfig: func() {
					if err := untouched(); err != nil {
						t.Fatalf("after the refused create: %v", err)
					}
					if err := nothingOf("web"); err != nil {
						t.Fatalf("the refused create: %v", err)
					}
				},
				Config: agent("api"),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
					func(*terraform.State) error { return untouched() }),
			},
			{
				Config: base,
				Check: func(*terraform.State) error {
					if err := nothingOf("api"); err != nil {
						return err
					}
					return untouched()
				},
			},
		},
	})
}
