package provider

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// identityPreCheck: resource identity is Terraform 1.12's.
func identityPreCheck(t *testing.T) { newTerraformPreCheck(t, 1, 12, "resource identity") }

// TestAccIdentity_Kubernetes: every resource records its identity (the
// agent: name and namespace; the logical objects: name), and each is
// imported again from an import block's identity, on the kwok control
// plane. The imported agent keeps its running revision: the plan that
// adopts it updates in place and plans no redeploy. An identity that names
// both a namespace and a host is refused, naming the fix.
func TestAccIdentity_Kubernetes(t *testing.T) {
	identityPreCheck(t) // before the environment starts
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	config := kubeAgentConfig(env, "", anthropicDoc, "")
	// importB adopts the agent again at a second address, by an identity
	// written out as a user would.
	importB := func(identity string) string {
		return config + `
import {
  to       = occ_agent.b
  identity = ` + identity + `
}
resource "occ_agent" "b" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}
`
	}
	importByIdentity := func(name string) resource.TestStep {
		return resource.TestStep{
			Config: config, ResourceName: name, ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity,
			// The import adopts what runs; the settings it cannot read back
			// (the references) come from configuration, in place.
			ExpectNonEmptyPlan: true,
		}
	}
	agentImport := importByIdentity("occ_agent.a")
	agentImport.ImportPlanChecks = resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
		plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
	}}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { identityPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectIdentity("occ_agent.a", map[string]knownvalue.Check{
						"name": knownvalue.StringExact("support"), "namespace": knownvalue.StringExact(env.ns),
						"host": knownvalue.Null(), "port": knownvalue.Null(),
					}),
					statecheck.ExpectIdentity("occ_compute.k", map[string]knownvalue.Check{"name": knownvalue.StringExact("prod")}),
					statecheck.ExpectIdentity("occ_configuration.c", map[string]knownvalue.Check{"name": knownvalue.StringExact("support")}),
					statecheck.ExpectIdentity("occ_credential_source.s", map[string]knownvalue.Check{"name": knownvalue.StringExact("anthropic")}),
				},
			},
			agentImport,
			{
				// terraform plan -generate-config-out: the import reads the
				// references the apply recorded on the Service, so the
				// generated configuration plans as it is, keeping revision 1
				// (nothing is deployed).
				Config: config, ResourceName: "occ_agent.a", ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity,
				GenerateConfig: true, ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.generated", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("compute").AtMapKey("name"), knownvalue.StringExact("prod")),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("harness_auth").AtMapKey("source").AtMapKey("name"), knownvalue.StringExact("anthropic")),
				}},
			},
			importByIdentity("occ_compute.k"),
			importByIdentity("occ_configuration.c"),
			importByIdentity("occ_credential_source.s"),
			{
				// The same agent by its identity written out, as a user
				// would, into a second address: it plans adoption only.
				Config:   importB(fmt.Sprintf(`{ name = "support", namespace = %q }`, env.ns)),
				PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				Config:      importB(`{ name = "support", namespace = "occ-acme", host = "10.0.0.5" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)INVALID_REQUEST: unexpected import identity.*both namespace and host`),
			},
			{
				Config:      importB(`{ name = "support" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)identity must set namespace.*or host`),
			},
			{
				// Nothing was adopted twice or changed: the re-plan is empty.
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// TestAccIdentity_SSH: an SSH agent's identity is its name, host and port;
// an import block with that identity adopts it on the real systemd host
// (reached on a port other than 22, which the identity carries).
func TestAccIdentity_SSH(t *testing.T) {
	identityPreCheck(t) // before the host boots
	env := newSSHEnv(t)
	doc := env.doc("anthropic/claude-sonnet-4-5", "")
	host, portText, _ := net.SplitHostPort(env.sshAddr)
	port, _ := strconv.ParseInt(portText, 10, 64)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { identityPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: env.config("", doc),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectIdentity("occ_agent.a", map[string]knownvalue.Check{
						"name": knownvalue.StringExact("support"), "namespace": knownvalue.Null(),
						"host": knownvalue.StringExact(host), "port": knownvalue.Int64Exact(port),
					}),
				},
			},
			{
				Config: env.config("", doc), ResourceName: "occ_agent.a", ImportState: true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity, ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				}},
			},
			{
				// The generated configuration plans too: the references come
				// back from the host's activation record.
				Config: env.config("", doc), ResourceName: "occ_agent.a", ImportState: true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity, GenerateConfig: true, ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.generated", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("compute").AtMapKey("settings"),
						knownvalue.StringRegexp(regexp.MustCompile(`^\{"ssh":\{.*"host":"`+regexp.QuoteMeta(host)+`"`))),
				}},
			},
		},
		CheckDestroy: env.destroyed,
	})
}

// TestAccAgent_GeneratedConfigPlans: `terraform plan -generate-config-out`
// with an import block by id (Terraform 1.5+, the main run's CLI): the
// import reads back the references the apply recorded on the Service, so
// the generated resource holds compute, configuration and harness_auth and
// plans as written, keeping the running revision (nothing deployed).
// OpenTofu is left out: terraform-plugin-testing's import-block steps run
// `init` in a directory where OpenTofu looks the in-process provider up in
// its registry, which these machines cannot reach.
func TestAccAgent_GeneratedConfigPlans(t *testing.T) {
	if testCLI(t).openTofu {
		t.Skip("terraform-plugin-testing's import-block steps cannot reattach the provider under OpenTofu (init looks it up in the registry); the Terraform runs cover this test")
	}
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	config := kubeAgentConfig(env, "", anthropicDoc, "")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				Config: config, ResourceName: "occ_agent.a", ImportState: true,
				ImportStateKind: resource.ImportBlockWithID, ImportStateId: env.ns + "/support",
				GenerateConfig: true, ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.generated", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("compute").AtMapKey("settings"),
						knownvalue.StringRegexp(regexp.MustCompile(`^\{"kubernetes":\{.*"namespace":"`+regexp.QuoteMeta(env.ns)+`"`))),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("configuration").AtMapKey("name"), knownvalue.StringExact("support")),
					plancheck.ExpectKnownValue("occ_agent.generated", tfjsonpath.New("harness_auth").AtMapKey("source").AtMapKey("method"), knownvalue.StringExact("api_key")),
				}},
			},
		},
	})
}
