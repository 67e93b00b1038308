package memkind

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/provider"
)

// tfTarget is the memory target the Terraform tests deploy to.
var tfTarget = NewTarget()

// terraformKind is the kind's registration with the provider: occ_compute
// gains a memory block (target, runtime) that converts into Settings.
func terraformKind() provider.Kind {
	return provider.Kind{
		Name:  Kind,
		Block: "memory",
		Schema: func() schema.SingleNestedAttribute {
			return schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "A target in memory (tests only).",
				Attributes: map[string]schema.Attribute{
					"target":  schema.StringAttribute{Required: true, MarkdownDescription: "The memory target."},
					"runtime": schema.StringAttribute{Required: true, MarkdownDescription: "The runtime's behaviour, /memkind/BEHAVIOUR/vN."},
				}}
		},
		Settings: func(_ context.Context, o types.Object, _ *diag.Diagnostics) any {
			a := o.Attributes()
			return Settings{Target: a["target"].(types.String).ValueString(), Runtime: a["runtime"].(types.String).ValueString()}
		},
		Hint:     "memory = { target = ..., runtime = ... } for a memory target",
		Where:    func(c admission.Compute) string { return "in memory target " + settingsOf(c).Target },
		Executor: &Executor{Targets: map[string]*Target{"t1": tfTarget}},
		AgentID:  AgentID,
		// The target attribute joins the agent identity, the occ_agent
		// list block and data.occ_agent.
		Target: &provider.Target{
			Attribute: "target", Description: "Memory (tests only): the memory target the Agent runs in.", Noun: "a memory target", Example: "t1",
			Of:      func(c admission.Compute) string { return settingsOf(c).Target },
			Compute: func(target string) admission.Compute { return Compute("", target, "") },
			FromID: func(id string) (string, bool) {
				rest, ok := strings.CutPrefix(id, "memory://")
				target, _, cut := strings.Cut(rest, "/")
				return target, ok && cut && target != ""
			},
		},
	}
}

// destroyedAll fails a test whose destroy left anything of the agent in
// the target.
func destroyedAll(*terraform.State) error {
	if left := tfTarget.Leftovers("support"); len(left) > 0 {
		return fmt.Errorf("destroy left %v", left)
	}
	return nil
}

var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"occ": providerserver.NewProtocol6WithError(provider.New("test", "test")()),
}

func memoryConfig(runtime, method string) string {
	return fmt.Sprintf(`
resource "occ_compute" "m" {
  name   = "mem"
  memory = { target = "t1", runtime = %q }
}
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.m
  method     = %q
  secret_ref = { name = "anthropic", key = "api-key" }
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.m
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}
`, runtime, method)
}

// The in-memory kind, registered with admission and the provider from
// this package alone (TestMain), runs agents through the real Terraform
// CLI: a memory block on occ_compute, a refusal by the kind's admission
// row at plan, a deploy, an update whose startup is held (the held code
// as the apply's diagnostic), its fix, an empty plan, and a destroy that
// leaves nothing in the target (issue 29).
//
//	make test TEST=./internal/testenv/memkind TESTARGS='-run TestAccMemoryKind -v'
func TestAccMemoryKind_ThroughTerraform(t *testing.T) {
	if os.Getenv("CI") != "" && os.Getenv("TF_ACC") == "" {
		t.Fatal("CI is set but TF_ACC is not: this acceptance test would be skipped. Run it through `make test`.")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             destroyedAll,
		Steps: []resource.TestStep{
			{
				// rule AU5: the kind's row takes api_key only.
				Config:      memoryConfig("/memkind/ready/v1", "codex_pat"),
				ExpectError: regexp.MustCompile(`(?s)a memory compute holds only api_key.*Rule AU5`),
				PlanOnly:    true,
			},
			{
				Config: memoryConfig("/memkind/ready/v1", "api_key"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("occ_compute.m", "kind", Kind),
					resource.TestCheckResourceAttr("occ_agent.a", "id", "memory://t1/support"),
					resource.TestCheckResourceAttr("occ_agent.a", "revision", "1"),
					resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
					func(*terraform.State) error {
						if left := strings.Join(tfTarget.Leftovers("support"), ", "); !strings.Contains(left, "activation support r1") {
							return fmt.Errorf("the target holds %s, want revision 1 activated", left)
						}
						return nil
					},
				),
			},
			{
				Config:      memoryConfig("/memkind/held/v2", "api_key"),
				ExpectError: regexp.MustCompile(`MODEL_PROBE_TIMEOUT`),
			},
			{
				Config: memoryConfig("/memkind/ready/v3", "api_key"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
					// The held revision 2 never became the agent's: the fix is
					// revision 2 again, as on the bundled kinds.
					resource.TestCheckResourceAttr("occ_agent.a", "revision", "2"),
				),
			},
			{
				// data.occ_agent reads the agent by the kind's target
				// attribute, as another workspace would; a name that is not
				// there is NOT_FOUND, in the kind's words.
				Config: memoryConfig("/memkind/ready/v3", "api_key") + `
data "occ_agent" "by_target" {
  name   = occ_agent.a.name
  target = "t1"
}
`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.occ_agent.by_target", "id", "memory://t1/support"),
					resource.TestCheckResourceAttr("data.occ_agent.by_target", "revision", "2"),
					resource.TestCheckResourceAttr("data.occ_agent.by_target", "status", "active"),
				),
			},
			{
				Config: memoryConfig("/memkind/ready/v3", "api_key") + `
data "occ_agent" "ghost" {
  name   = "ghost"
  target = "t1"
}
`,
				ExpectError: regexp.MustCompile(`NOT_FOUND: agent "ghost" not found in memory target t1`),
			},
			{
				Config:        memoryConfig("/memkind/ready/v3", "api_key"),
				ResourceName:  "occ_agent.a",
				ImportState:   true,
				ImportStateId: "memory://t1/support",
				// An import by id finds the agent through the kind's executor
				// (ParseImportID, Read): its revision and status as the target
				// holds them.
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("%d states imported", len(states))
					}
					got := states[0].Attributes
					for k, want := range map[string]string{"id": "memory://t1/support", "name": "support", "revision": "2", "status": "active"} {
						if got[k] != want {
							return fmt.Errorf("imported %s = %q, want %q", k, got[k], want)
						}
					}
					return nil
				},
			},
		},
	})
}
