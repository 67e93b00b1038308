package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccAgent_RevisionReason: the plan says why an agent gets a new
// revision (issue 16: the plan must say why each agent gets one): its
// first, then the compute setting that changed with its old and new
// value; a change that keeps the revision (a network policy) keeps the
// reason and plans no restart.
func TestAccAgent_RevisionReason(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	reason := func(v knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision_reason"), v)
	}
	cpu := `, cpu_limit = "1"`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision_reason"), knownvalue.StringExact(reasonFirst)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{reason(knownvalue.StringExact(reasonFirst))},
			},
			{
				Config: kubeAgentConfig(env, cpu, anthropicDoc, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision_reason"), knownvalue.StringExact("the compute's cpu_limit 2000m → 1000m")),
				}},
			},
			{
				Config: kubeAgentConfig(env, cpu+`, network_policy = { enabled = false }`, anthropicDoc, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{reason(knownvalue.StringRegexp(regexp.MustCompile(`^the compute's cpu_limit 2000m → 1000m$`)))},
			},
		},
	})
}
