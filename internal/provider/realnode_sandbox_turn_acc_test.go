package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/startup/fakemodel"
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
	sb := newSandboxEnvIn(t, env.cluster, env.ns)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config := sb.provider + sb.sandboxCompute("k", `cpu_limit = "1"
    memory_limit = "2Gi"`) + withChatCompletions(t, codexAgentConfig(srv.URL, "8m"), `agents = { defaults = { model = "codex/gpt-5-codex" } }`)
	clock := &applyClock{}
	var gatewayIP string
	defer podLogsOnFailure(t, env, "coder")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{turnStep(config, clock, func(ctx context.Context) error {
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
		})},
	})
	gatewayCalledNoModel(t, srv, gatewayIP)
}
