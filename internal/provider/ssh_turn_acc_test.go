package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// sshGatewayToken is a gateway token the SSH turn tests put into the
// runtime source's environment file, beside the model key: the agent's own
// token (render.GatewayTokenFile) must win over it.
const sshGatewayToken = "ssh-gateway-token-for-the-turn-tests-5be1c0"

// withGatewayToken adds OPENCLAW_GATEWAY_TOKEN to the host's credentials
// file (the operator's file, AU5), which the agent's own token file,
// loaded after it, overrides.
func (e *sshEnv) withGatewayToken(t *testing.T) {
	t.Helper()
	e.run(t, fmt.Sprintf(`printf 'OPENCLAW_GATEWAY_TOKEN=%s\n' >> %s`, sshGatewayToken, sshEnvFile))
	e.envSum = e.run(t, "sha256sum "+sshEnvFile)
}

// turnDoc is an SSH agent's document whose primary model is Anthropic at
// the fake endpoint, with the gateway's chat completions endpoint on; the
// platform sets its token auth.
func (e *sshEnv) turnDoc(baseURL string) string {
	return fmt.Sprintf(`{
    agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
    models = { providers = { anthropic = {
      baseUrl = %q
      api     = "anthropic-messages"
      models  = [{ id = "claude-sonnet-4-5", name = "Claude Sonnet 4.5" }]
    } } }
    gateway = { port = %d, http = { endpoints = { chatCompletions = { enabled = true } } } }
  }`, baseURL, e.gatewayPort)
}

// turnConfig is config with the document and an explicit harness (an own
// provider entry needs a runtime policy, MR5).
func (e *sshEnv) turnConfig(t *testing.T, baseURL string) string {
	t.Helper()
	c := strings.Replace(e.config("", e.turnDoc(baseURL)), "  harness_auth  = {", "  harness       = \"openclaw\"\n  harness_auth  = {", 1)
	if !strings.Contains(c, `harness       = "openclaw"`) {
		t.Fatal("the configuration was not rewritten")
	}
	return c
}

// sendSSHTurn sends a turn to the gateway on the host's loopback through
// an SSH connection of the test's own.
func (e *sshEnv) sendSSHTurn(ctx context.Context, token, message string) (turn.Answer, error) {
	c, err := sshhost.Dial(ctx, e.host.Addr, e.host.ClientConfig("root"))
	if err != nil {
		return turn.Answer{}, err
	}
	defer c.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: c.DialContext, DisableKeepAlives: true}}
	return turn.Send(ctx, hc, turn.Request{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", e.gatewayPort), Token: token, Message: message})
}

// TestAccAgent_SSHEmbeddedTurn: embedded OpenClaw on the nspawn systemd
// host answers a turn. The gateway, started by systemd with the runtime
// source's environment file (AU5: the model key and the gateway token are
// the operator's, never Terraform's), calls the model the configuration
// names, on the host's loopback, with the key from that file; the answer
// comes back through the SSH connection. Issue 27: the gateway
// authenticates with the agent's own token, which the deploy made on the
// host in a file only root reads; without it (no token, a wrong one, the
// operator's from the credentials file) the gateway refuses the turn, and
// the token is in neither plan nor state.
func TestAccAgent_SSHEmbeddedTurn(t *testing.T) {
	env := newSSHEnv(t)
	env.withGatewayToken(t)
	// The host shares this machine's network: the fake model endpoint on
	// loopback is the host's loopback too.
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	t.Cleanup(srv.Close)
	clock := &applyClock{}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:           env.turnConfig(t, srv.URL),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{clock, sentinelAbsentFromPlan{testSentinel}, sentinelAbsentFromPlan{sshGatewayToken}}},
			ConfigStateChecks: []statecheck.StateCheck{
				sentinelAbsentFromState{testSentinel},
				sentinelAbsentFromState{sshGatewayToken},
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: func(s *terraform.State) error {
				clock.stop()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				start := time.Now()
				tokenFile := sshAgentDir + "/" + render.GatewayTokenFile
				if mode, err := env.check("stat -c '%U:%G:%a' " + tokenFile); err != nil || mode != "root:root:600" {
					return fmt.Errorf("the agent's token file %s is %q (%v), want root:root:600", tokenFile, mode, err)
				}
				own, err := env.check("sed -n 's/^OPENCLAW_GATEWAY_TOKEN=//p' " + tokenFile)
				if err != nil || len(own) != 64 {
					return fmt.Errorf("the agent's token file holds %d characters (%v), want 64 hex digits", len(own), err)
				}
				if st := fmt.Sprintf("%#v", s.RootModule().Resources); strings.Contains(st, own) {
					return errors.New("the agent's gateway token is in the state")
				}
				a, err := env.sendSSHTurn(ctx, own, "Say ok.")
				if err != nil {
					return fmt.Errorf("the turn: %w", err)
				}
				ttft := a.FirstToken
				if a.Text != "ok" {
					return fmt.Errorf("the agent answered %q, want the model's %q", a.Text, "ok")
				}
				calls := srv.ProbeRequests() // SSH runs no startup probe (SS2): every call is the turn's
				if len(calls) == 0 {
					return errors.New("the turn answered without a model call")
				}
				for _, c := range calls {
					if c.Path != "/v1/messages" || c.Credential != testSentinel || c.Model != "claude-sonnet-4-5" {
						return fmt.Errorf("model call %s %s model %q (the host's key: %v); want POST /v1/messages, claude-sonnet-4-5, with the key of the environment file",
							c.Method, c.Path, c.Model, c.Credential == testSentinel)
					}
				}
				for _, tok := range []string{"", "not-the-gateway-token", sshGatewayToken} {
					_, err := env.sendSSHTurn(ctx, tok, "hello")
					var te *turn.Error
					if !errors.As(err, &te) || !te.Unauthorized() {
						return fmt.Errorf("a turn with token %q: %v, want 401", tok, err)
					}
				}
				t.Logf("figures: embedded OpenClaw over SSH: activated in %s (apply), first answered token %s after activation (turn total %s)",
					clock.apply().Round(time.Millisecond), (time.Since(start) - a.Total + ttft).Round(time.Millisecond), a.Total.Round(time.Millisecond))
				return nil
			},
		}},
		CheckDestroy: env.destroyed,
	})
}
