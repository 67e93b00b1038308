package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// The turn tests: what an agent is deployed for, on the real node. After
// the apply returns, one message goes in through the gateway's own client
// surface (its OpenAI-compatible chat completions endpoint, through the
// agent's Service, with the gateway token), and the answer comes out. The
// fake model endpoint records who called it, with which key, at which
// path, so each test asserts that the model was called by the right
// process with the agent's key at the endpoint the configuration names.

// chatCompletionsOn is the document fragment that makes the gateway serve
// its chat completions endpoint (off by default upstream).
const chatCompletionsOn = `gateway = { http = { endpoints = { chatCompletions = { enabled = true } } } }`

// withChatCompletions turns the gateway's chat completions endpoint on in
// a test configuration, beside its agents line.
func withChatCompletions(t *testing.T, config, agentsLine string) string {
	t.Helper()
	out := strings.Replace(config, agentsLine, agentsLine+"\n    "+chatCompletionsOn, 1)
	if out == config {
		t.Fatal("the configuration was not rewritten")
	}
	return out
}

// podLogsOnFailure logs the agent's container logs, the key redacted, when
// the test has failed by the time it runs (defer it).
func podLogsOnFailure(t *testing.T, env realEnv, agent string) {
	if !t.Failed() {
		return
	}
	logs, _ := podLogs(context.Background(), env, agent)
	for name, l := range logs {
		t.Logf("--- %s:\n%s", name, strings.ReplaceAll(l, testSentinel, "<key>"))
	}
}

// applyClock records when the apply of a step starts (a PreApply plan
// check runs right before it) and when its checks start (right after the
// apply returned): the activation time, as the user waits for it.
type applyClock struct {
	mu                sync.Mutex
	started, returned time.Time
}

func (c *applyClock) CheckPlan(context.Context, plancheck.CheckPlanRequest, *plancheck.CheckPlanResponse) {
	c.mu.Lock()
	c.started = time.Now()
	c.mu.Unlock()
}

func (c *applyClock) stop() {
	c.mu.Lock()
	c.returned = time.Now()
	c.mu.Unlock()
}

func (c *applyClock) apply() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.returned.Sub(c.started)
}

// turnStep is a turn test's one step: apply config, timed by clock, the
// agent active, then check, right after the apply returned.
func turnStep(config string, clock *applyClock, check func(context.Context) error) resource.TestStep {
	return resource.TestStep{
		Config:           config,
		ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{clock}},
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
		},
		Check: func(*terraform.State) error {
			clock.stop()
			return check(context.Background())
		},
	}
}

// turnThroughService sends one turn to the agent's gateway through its
// Service from inside the node's network, with the gateway token of the
// agent's Secret. A connection refused while kube-proxy programs a new
// Service is retried; an answer of the gateway (a refusal, a failed run)
// is not. The duration returned is from the call (right after the apply
// returned) to the answer's first token.
func turnThroughService(ctx context.Context, e realEnv, agent, message string) (turn.Answer, time.Duration, error) {
	cs := e.cluster.Clientset
	sec, err := cs.CoreV1().Secrets(e.ns).Get(ctx, render.GatewayTokenSecret(agent), metav1.GetOptions{})
	if err != nil {
		return turn.Answer{}, 0, err
	}
	svc, err := cs.CoreV1().Services(e.ns).Get(ctx, agent, metav1.GetOptions{})
	if err != nil {
		return turn.Answer{}, 0, err
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(render.GatewayPort))
	c := e.httpClient()
	c.Timeout = 0 // the turn's context bounds it
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		a, err := turn.Send(tctx, c, turn.Request{BaseURL: base, Token: string(sec.Data[render.GatewayTokenKey]), Message: message})
		cancel()
		var te *turn.Error
		if err == nil || errors.As(err, &te) || time.Now().After(deadline) {
			return a, time.Since(start) - a.Total + a.FirstToken, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// refusedWithoutToken checks that the gateway's chat endpoint refuses a
// turn without the gateway token and with another one.
func refusedWithoutToken(ctx context.Context, e realEnv, agent string) error {
	svc, err := e.cluster.Clientset.CoreV1().Services(e.ns).Get(ctx, agent, metav1.GetOptions{})
	if err != nil {
		return err
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(render.GatewayPort))
	for _, tok := range []string{"", "not-the-gateway-token-0123456789"} {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := turn.Send(tctx, e.httpClient(), turn.Request{BaseURL: base, Token: tok, Message: "hello"})
		cancel()
		var te *turn.Error
		if !errors.As(err, &te) || !te.Unauthorized() {
			return fmt.Errorf("a turn with token %q: %v, want 401", tok, err)
		}
	}
	return nil
}

// podIP is the IP of the agent's one Pod of a component.
func podIP(ctx context.Context, e realEnv, agent, component string) (string, error) {
	pods, err := e.cluster.Clientset.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{
		LabelSelector: render.LabelAgent + "=" + agent + "," + render.LabelComponent + "=" + component})
	if err != nil {
		return "", err
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) != 1 {
		return "", fmt.Errorf("%s Pods of %s with an IP: %v, want one", component, agent, ips)
	}
	return ips[0], nil
}

// turnCalls are the model calls made after the probe: those of the turn.
func turnCalls(srv *fakemodel.Server, probes int) []fakemodel.Request {
	calls := srv.ProbeRequests()
	if len(calls) <= probes {
		return nil
	}
	return calls[probes:]
}

// TestAccAgent_RealNodeEmbeddedTurn: embedded OpenClaw on the real node
// answers a turn. The message goes into the gateway's chat completions
// endpoint through the agent's Service with the gateway token; the
// gateway itself (its Pod's address) calls the model the configuration
// names, at its baseUrl, with the agent's key; the model's words come
// back. Without the token, or with another, the gateway refuses the turn.
func TestAccAgent_RealNodeEmbeddedTurn(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config := withChatCompletions(t, realAgentConfig(env, srv.URL, "6m"), `agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }`)
	// The runtime image pinned by digest, as a release's default names it
	// (internal/release): the node resolves name:tag@digest to the image
	// it imported.
	digest, err := kubeenv.ImageDigest("openclaw")
	if err != nil {
		t.Fatal(err)
	}
	pinned := withRuntimeImage(t, env, config, admission.PinnedRuntimeImage+"@"+digest)
	clock := &applyClock{}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{turnStep(pinned, clock, func(ctx context.Context) error {
			probes := len(srv.ProbeRequests())
			a, ttft, err := turnThroughService(ctx, env, "support", "Say ok.")
			if err != nil {
				return fmt.Errorf("the turn: %w", err)
			}
			if a.Text != "ok" {
				return fmt.Errorf("the agent answered %q, want the model's %q", a.Text, "ok")
			}
			gw, err := podIP(ctx, env, "support", render.ComponentGateway)
			if err != nil {
				return err
			}
			calls := turnCalls(srv, probes)
			if len(calls) == 0 {
				return fmt.Errorf("the turn answered without a model call")
			}
			for _, c := range calls {
				// The configuration's endpoint (baseUrl + the Messages
				// API), the agent's key, its primary model, and the
				// gateway's own Pod: embedded, the gateway is the harness.
				if c.Path != "/v1/messages" || c.Credential != testSentinel || c.Model != "claude-sonnet-4-5" || c.Remote != gw {
					return fmt.Errorf("model call %s %s model %q from %s (the agent's key: %v); want POST /v1/messages, claude-sonnet-4-5, from the gateway %s, with the key",
						c.Method, c.Path, c.Model, c.Remote, c.Credential == testSentinel, gw)
				}
			}
			if err := refusedWithoutToken(ctx, env, "support"); err != nil {
				return err
			}
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if !strings.HasSuffix(cs.ImageID, digest) {
						return fmt.Errorf("container %s/%s runs %s (%s); want the image pinned by %s", p.Name, cs.Name, cs.Image, cs.ImageID, digest)
					}
				}
			}
			t.Logf("figures: embedded OpenClaw: activated in %s (apply), first answered token %s after activation (turn total %s)",
				clock.apply().Round(time.Millisecond), ttft.Round(time.Millisecond), a.Total.Round(time.Millisecond))
			return nil
		})},
	})
}

// TestAccAgent_RealNodeDedicatedCodexTurn: dedicated Codex on the real node
// answers a turn sent the moment the apply returns (PR10: the gateway
// waits for its harness before it serves). The message goes into the
// gateway's chat completions endpoint; the gateway's Codex plugin starts a
// thread on the app server with the provider the configuration names
// (openai-compatible, MR4, PR3); the app server, from the harness Pod's
// address, calls the configuration's baseUrl with the agent's key; the
// gateway itself makes no model call at all (it has no key, AU6).
func TestAccAgent_RealNodeDedicatedCodexTurn(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config := withChatCompletions(t, realCodexConfig(env, srv.URL, "8m"), `agents = { defaults = { model = "codex/gpt-5-codex" } }`)
	clock := &applyClock{}
	var gatewayIP string
	defer podLogsOnFailure(t, env, "coder")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{turnStep(config, clock, func(ctx context.Context) error {
			a, ttft, gw, err := dedicatedTurn(ctx, env, srv, "coder")
			if err != nil {
				return err
			}
			gatewayIP = gw
			if err := refusedWithoutToken(ctx, env, "coder"); err != nil {
				return err
			}
			t.Logf("figures: dedicated Codex: activated in %s (apply), first answered token %s after activation (turn total %s)",
				clock.apply().Round(time.Millisecond), ttft.Round(time.Millisecond), a.Total.Round(time.Millisecond))
			return nil
		})},
	})
	gatewayCalledNoModel(t, srv, gatewayIP)
}

// dedicatedTurn sends a turn to a dedicated Codex agent right after its
// activation and checks it (dedicatedTurnCalls), and that every model call
// of the turn came from the harness Pod's address. It returns the answer,
// the time to its first token after activation, and the gateway Pod's
// address.
func dedicatedTurn(ctx context.Context, env realEnv, srv *fakemodel.Server, agent string) (turn.Answer, time.Duration, string, error) {
	a, ttft, gw, harness, calls, err := dedicatedTurnCalls(ctx, env, srv, agent)
	if err != nil {
		return a, 0, "", err
	}
	for _, c := range calls {
		if c.Remote != harness {
			return a, 0, "", fmt.Errorf("model call %s %s from %s; want it from the harness %s", c.Method, c.Path, c.Remote, harness)
		}
	}
	return a, ttft, gw, nil
}

// dedicatedTurnCalls sends a turn to a dedicated Codex agent right after
// its activation and checks the model's answer, and that every model call
// of the turn went to the configured Responses endpoint for gpt-5-codex
// with the agent's key. It returns the answer, the time to its first
// token, the gateway's and the harness's Pod addresses and the turn's
// model calls.
func dedicatedTurnCalls(ctx context.Context, env realEnv, srv *fakemodel.Server, agent string) (a turn.Answer, ttft time.Duration, gw, harness string, calls []fakemodel.Request, err error) {
	probes := len(srv.ProbeRequests())
	a, ttft, err = turnThroughService(ctx, env, agent, "Say ok.")
	if err != nil {
		return a, 0, "", "", nil, fmt.Errorf("the turn, right after activation: %w", err)
	}
	if a.Text != "ok" {
		return a, 0, "", "", nil, fmt.Errorf("the agent answered %q, want the model's %q", a.Text, "ok")
	}
	if gw, err = podIP(ctx, env, agent, render.ComponentGateway); err != nil {
		return a, 0, "", "", nil, err
	}
	if harness, err = podIP(ctx, env, agent, render.ComponentHarness); err != nil {
		return a, 0, "", "", nil, err
	}
	calls = turnCalls(srv, probes)
	if len(calls) == 0 {
		return a, 0, "", "", nil, fmt.Errorf("the turn answered without a model call")
	}
	for _, c := range calls {
		if c.Path != "/v1/responses" || c.Credential != testSentinel || c.Model != "gpt-5-codex" {
			return a, 0, "", "", nil, fmt.Errorf("model call %s %s model %q (the agent's key: %v); want POST /v1/responses, gpt-5-codex, with the key",
				c.Method, c.Path, c.Model, c.Credential == testSentinel)
		}
	}
	return a, ttft, gw, harness, calls, nil
}

// gatewayCalledNoModel: over the whole test (probe and turn), the gateway
// at gatewayIP called no model (AU6: it holds no key).
func gatewayCalledNoModel(t *testing.T, srv *fakemodel.Server, gatewayIP string) {
	t.Helper()
	if gatewayIP == "" {
		t.Fatal("the gateway's address was never read: the check would prove nothing")
	}
	for _, r := range srv.Requests() {
		if r.Remote == gatewayIP {
			t.Errorf("the gateway called the model: %s %s", r.Method, r.Path)
		}
	}
}

// withRuntimeImage sets the compute's runtime_image in a real-node test
// configuration.
func withRuntimeImage(t *testing.T, env realEnv, config, image string) string {
	t.Helper()
	ns := fmt.Sprintf("namespace = %q", env.ns)
	out := strings.Replace(config, ns, ns+fmt.Sprintf(", runtime_image = %q", image), 1)
	if out == config {
		t.Fatal("the configuration was not rewritten")
	}
	return out
}
