package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// realNodeSandboxedCodex is the agent of the real-node Sandbox tests:
// dedicated Codex "coder" on a sandboxed compute of 1 CPU and 2 GiB, whose
// harness answers through the fake model srv (one OK answer per turn), with
// the gateway's chat completions on for the turns.
func realNodeSandboxedCodex(t *testing.T) (env realEnv, sb sandboxEnv, srv *fakemodel.Server, config string) {
	t.Helper()
	env = newRealEnv(t)
	sb = newSandboxEnvIn(t, env.cluster, env.ns)
	srv = env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config = sb.provider + sb.sandboxCompute("k", `cpu_limit = "1"
    memory_limit = "2Gi"`) + withChatCompletions(t, codexAgentConfig(srv.URL, "8m"), `agents = { defaults = { model = "codex/gpt-5-codex" } }`)
	return env, sb, srv, config
}

// TestAccAgent_RealNodeSandboxedCodexTurn: dedicated Codex whose harness
// the sandbox driver provisions (one Sandbox per revision; the test
// driver stands in for OpenShell, internal/testenv/kubeenv/sandboxdriver.go)
// answers a turn on the real node: the gateway's Codex plugin reaches the
// app server in the Sandbox's Pod through the harness Service, and that
// Pod, not the gateway, calls the configured endpoint with the agent's
// key (rules HM5, AU6, PR3). The Sandbox path whose key a Credential
// Gateway holds is TestAccAgent_RealNodeCredentialGatewayTurn.
func TestAccAgent_RealNodeSandboxedCodexTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("the real node")
	}
	env, sb, srv, config := realNodeSandboxedCodex(t)
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

// TestAccAgent_RealNodeCredentialGatewayTurn: dedicated Codex in a Sandbox
// whose key comes from a Credential Gateway (credential_source) answers a
// turn on the real node (rules AU3, OS1, AU6). The harness holds only the
// placeholder; the test driver's Credential Gateway (the project's egress
// contract, sandboxapi.Placeholder) swaps in the key it holds on the way
// out, so the model sees the key and never the placeholder. First the
// gateway holds no credential for the source: the attachment is reported
// False and the apply fails at once with CREDENTIAL_ATTACHMENT_FAILED;
// once it holds one, the agent activates and answers.
func TestAccAgent_RealNodeCredentialGatewayTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("the real node")
	}
	env := newRealEnv(t)
	sb := newSandboxEnvIn(t, env.cluster, env.ns)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	l, err := env.node.ListenInNode("tcp", env.node.NodeIP+":0")
	if err != nil {
		t.Fatalf("listen in the node: %v", err)
	}
	upstream := strings.TrimPrefix(srv.URL, "http://")
	sb.driver.ServeCredentialGateway(kubeenv.CredentialGatewayOptions{Listener: l, Dial: env.node.DialInNode, Upstreams: []string{upstream}})
	// The Pods' connections to the model go through the gateway, as a
	// Sandbox's egress does; the gateway itself dials the model directly.
	env.node.RedirectInNode(t, upstream, l.Addr().String())
	config := sb.provider + sb.sandboxCompute("k", `cpu_limit = "1"
    memory_limit = "2Gi"
    credential_gateway = { name = "cg-main" }`) + withChatCompletions(t, credentialGatewayCodexConfig(t, srv.URL, "8m"), `agents = { defaults = { model = "codex/gpt-5-codex" } }`)
	clock := &applyClock{}
	var gatewayIP string
	defer podLogsOnFailure(t, env, "coder")
	held := resource.TestStep{
		Config:      config,
		ExpectError: regexp.MustCompile(`(?s)CREDENTIAL_ATTACHMENT_FAILED.*` + kubeenv.ReasonCredentialNotHeld),
	}
	turned := turnStep(config, clock, func(ctx context.Context) error {
		a, ttft, gw, err := credentialGatewayTurn(ctx, env, sb, srv, "coder")
		if err != nil {
			return err
		}
		gatewayIP = gw
		t.Logf("figures: dedicated Codex behind a Credential Gateway: activated in %s (apply, including the destroy of the failed step's tainted revision), first answered token %s after activation (turn total %s)",
			clock.apply().Round(time.Millisecond), ttft.Round(time.Millisecond), a.Total.Round(time.Millisecond))
		return nil
	})
	turned.PreConfig = func() { sb.driver.HoldCredential("cg-main", "openai", testSentinel) }
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    []resource.TestStep{held, turned},
	})
	gatewayCalledNoModel(t, srv, gatewayIP)
	for _, r := range srv.Requests() {
		if r.Credential != testSentinel {
			t.Errorf("the model saw %s %s from %s at %s without the held key (the placeholder: %v)", r.Method, r.Path, r.Remote, r.Time.Format(time.StampMilli), r.Credential == sandboxapi.Placeholder)
		}
	}
	if t.Failed() {
		for _, r := range sb.driver.Egress() {
			t.Logf("egress: %+v", r)
		}
	}
}

// credentialGatewayCodexConfig is codexAgentConfig with its key from the
// Credential Gateway: a credential_source source named "openai".
func credentialGatewayCodexConfig(t *testing.T, baseURL, timeout string) string {
	t.Helper()
	c := codexAgentConfig(baseURL, timeout)
	out := strings.Replace(c, writeOnlyKeySource("openai"), `
resource "occ_credential_source" "s" {
  name        = "openai"
  method      = "credential_source"
  source_type = "openai_api_key"
}
`, 1)
	if out == c {
		t.Fatal("the configuration was not rewritten")
	}
	return out
}

// credentialGatewayTurn sends a turn to a dedicated agent behind the
// Credential Gateway right after activation and checks it: the model's
// answer; every model call of the turn made with the held key, through
// the egress proxy, which saw each come from the harness Pod and swapped
// the placeholder. It returns the answer, the time to its first token and
// the gateway Pod's address.
func credentialGatewayTurn(ctx context.Context, env realEnv, sb sandboxEnv, srv *fakemodel.Server, agent string) (turn.Answer, time.Duration, string, error) {
	a, ttft, gw, harness, calls, err := dedicatedTurnCalls(ctx, env, srv, agent)
	if err != nil {
		return a, 0, "", err
	}
	var swapped int
	for _, r := range sb.driver.Egress() {
		if r.Remote != harness {
			continue
		}
		if r.Status != 0 || !r.Swapped {
			return a, 0, "", fmt.Errorf("the egress proxy answered the harness's %s %s itself (status %d, swapped %v)", r.Method, r.URL, r.Status, r.Swapped)
		}
		swapped++
	}
	if swapped < len(calls) {
		return a, 0, "", fmt.Errorf("the egress proxy swapped the placeholder in %d requests of the harness %s; the model saw %d turn calls", swapped, harness, len(calls))
	}
	return a, ttft, gw, nil
}
