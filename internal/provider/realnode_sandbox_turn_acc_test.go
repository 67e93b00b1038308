package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/startup/fakemodel"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

// TestAccAgent_RealNodeSandboxedCodexTurn: dedicated Codex whose harness
// the sandbox driver provisions (one Sandbox per revision; the test
// driver stands in for OpenShell, internal/testenv/kube/sandboxdriver.go)
// answers a turn on the real node: the gateway's Codex plugin reaches the
// app server in the Sandbox's Pod through the harness Service, and that
// Pod, not the gateway, calls the configured endpoint with the agent's
// key (rules HM5, AU6, PR3). The Sandbox path that holds a Credential
// Gateway key (credential_source) needs the Gateway's egress proxy, which
// nothing here runs; this is the sandboxed path a turn can prove.
func TestAccAgent_RealNodeSandboxedCodexTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("the real node")
	}
	env := newRealEnv(t)
	c := testkube.Shared(t)
	sb := newSandboxEnvIn(t, c, env.ns)
	env.provider = sb.provider
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config := sb.provider + sb.sandboxCompute("k", `cpu_limit = "1"
    memory_limit = "2Gi"`) + fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "coder"
  document = jsonencode({
    agents  = { defaults = { model = "codex/gpt-5-codex" } }
    models  = { providers = { codex = {
      baseUrl = %q
      models  = [{ id = "gpt-5-codex", name = "GPT-5 Codex" }]
    } } }
    %s
  })
}
`, srv.URL+"/v1", chatCompletionsOn) + writeOnlyKeySource("openai") + `resource "occ_agent" "a" {
  name           = "coder"
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = "codex"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.s }
  timeouts       = { create = "8m", update = "8m", delete = "2m" }
}`
	clock := &applyClock{}
	var gatewayIP string
	defer podLogsOnFailure(t, env, "coder")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:           config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{clock}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: func(*terraform.State) error {
				clock.stop()
				ctx := context.Background()
				if _, err := sb.sandbox(t, render.HarnessSandboxName("coder", 1)); err != nil {
					return fmt.Errorf("the revision's Sandbox: %w", err)
				}
				a, ttft, gw, err := dedicatedTurn(ctx, env, srv, "coder")
				if err != nil {
					return err
				}
				gatewayIP = gw
				t.Logf("figures: sandboxed dedicated Codex: activated in %s (apply), first answered token %s after activation (turn total %s)",
					clock.apply().Round(time.Millisecond), ttft.Round(time.Millisecond), a.Total.Round(time.Millisecond))
				return nil
			},
		}},
	})
	gatewayCalledNoModel(t, srv, gatewayIP)
}
