package provider

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// The acceptance tests on the real node: the provider's own runtime images
// (testenv/images.sh) run under a real kubelet, the real startup wrapper
// probes a model endpoint served inside the node's network namespace, and
// the real OpenClaw gateway starts. Nothing is simulated but the model.

// realEnv is a kubeEnv whose namespace runs on the real node.
type realEnv struct {
	kubeEnv
	node *kubeenv.RealNode
}

func newRealEnv(t *testing.T) realEnv {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests skipped unless env %s is set (the real node takes half a minute to start)", resource.EnvTfAcc)
	}
	c := kubeenv.Shared(t)
	node := c.RealNode(t)
	return realEnv{kubeEnv: newKubeEnvIn(t, c, c.RealNamespace(t)), node: node}
}

// model serves the fake model provider inside the node's network
// namespace, at the node's address: the Pods' probe reaches it, nothing
// outside the test environment can.
func (e realEnv) model(t *testing.T, steps ...fakemodel.Step) *fakemodel.Server {
	t.Helper()
	l, err := e.node.ListenInNode("tcp", e.node.NodeIP+":0")
	if err != nil {
		t.Fatalf("listen in the node: %v", err)
	}
	srv := fakemodel.NewOn(l, steps...)
	t.Cleanup(srv.Close)
	return srv
}

// httpClient dials from inside the node's network namespace (Service
// ClusterIPs through kube-proxy, Pod IPs).
func (e realEnv) httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.node.DialInNode(ctx, network, addr)
		},
	}}
}

// realAgentConfig: an embedded OpenClaw agent whose primary model is
// Anthropic at the fake endpoint's literal baseUrl (PR11), with a
// write-only api_key taken from TF_VAR_key.
func realAgentConfig(e realEnv, baseURL, timeout string) string {
	return e.provider + e.compute("") + fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode({
    agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
    models = { providers = { anthropic = {
      baseUrl = %q
      api     = "anthropic-messages"
      models  = [{ id = "claude-sonnet-4-5", name = "Claude Sonnet 4.5" }]
    } } }
  })
}
`+writeOnlyKeySource("anthropic")+`resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness       = "openclaw"
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = %q, update = %q, delete = "2m" }
}`, baseURL, timeout, timeout)
}

// traceLogDir turns on TF_LOG=TRACE for the test, into a fresh directory.
func traceLogDir(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("TF_LOG", "TRACE")
	t.Setenv("TF_LOG_PATH_MASK", dir+"/%s.log")
	return dir
}

// readTraceLogs is everything written under dir by TF_LOG_PATH_MASK; it
// fails the test when nothing was (a check of it would prove nothing).
func readTraceLogs(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no trace log was written (%v): the check would prove nothing", err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// traceLogs turns on TF_LOG=TRACE and returns a check that the logs were
// written and hold none of the secrets.
func traceLogs(t *testing.T) func(secrets ...string) {
	dir := traceLogDir(t)
	return func(secrets ...string) {
		t.Helper()
		logs := readTraceLogs(t, dir)
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("the trace log holds a secret (%d bytes)", len(s))
			}
		}
	}
}

// TestAccAgent_RealNodeEmbedded: on the real node, the real wrapper probes
// the model with the agent's key, the real OpenClaw gateway starts, the
// apply returns once the startup probe has passed and the revision is
// activated, and the gateway's /readyz answers through the Service (PR1,
// PR9, AC3). The key is in no state, plan or TRACE log (AU7).
func TestAccAgent_RealNodeEmbedded(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	checkLogs := traceLogs(t)
	t.Setenv("TF_VAR_key", testSentinel)
	cs := env.cluster.Clientset
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:           realAgentConfig(env, srv.URL, "6m"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
			ConfigStateChecks: []statecheck.StateCheck{
				sentinelAbsentFromState{testSentinel},
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: resource.ComposeTestCheckFunc(phaseRecorded("occ_agent.a", "gateway", "model_probe", "ok"), func(*terraform.State) error {
				ctx := context.Background()
				pods, err := cs.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
				if err != nil || len(pods.Items) != 1 {
					return fmt.Errorf("gateway Pods: %d (%v)", len(pods.Items), err)
				}
				if n := pods.Items[0].Spec.NodeName; n != env.node.Name {
					return fmt.Errorf("the gateway ran on %q, not on the real node %q", n, env.node.Name)
				}
				// rule PR1: the wrapper made the probe, with the agent's key.
				probes := srv.ProbeRequests()
				if len(probes) != 1 {
					return fmt.Errorf("%d probe requests reached the model, want 1", len(probes))
				}
				if probes[0].Credential != testSentinel {
					return fmt.Errorf("the probe did not carry the agent's key")
				}
				svc, err := cs.CoreV1().Services(env.ns).Get(ctx, "support", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if svc.Annotations[kube.AnnotationActivatedRevision] != "1" {
					return fmt.Errorf("service activated %q, want 1", svc.Annotations[kube.AnnotationActivatedRevision])
				}
				// kube-proxy programs a new Service within moments of its
				// creation at activation; wait for it, not for the gateway.
				var status int
				var body []byte
				deadline := time.Now().Add(60 * time.Second)
				for {
					resp, err := env.httpClient().Get(fmt.Sprintf("http://%s:%d/readyz", svc.Spec.ClusterIP, render.GatewayPort))
					if err == nil {
						status = resp.StatusCode
						body, _ = io.ReadAll(resp.Body)
						resp.Body.Close()
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("the gateway's /readyz through the Service: %w", err)
					}
					time.Sleep(200 * time.Millisecond)
				}
				if status != http.StatusOK {
					return fmt.Errorf("the gateway's /readyz through the Service: %d %s", status, body)
				}
				t.Logf("/readyz through the Service %s: %s", svc.Spec.ClusterIP, body)
				return nil
			}),
		}},
	})
	checkLogs(testSentinel)
}

// phaseRecorded checks that an agent's startup_phases hold the phase of
// the component with the outcome (the runtime's own records, PR9).
func phaseRecorded(resourceName, component, phase, outcome string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[resourceName]
		if !ok {
			return fmt.Errorf("%s is not in state", resourceName)
		}
		a := rs.Primary.Attributes
		n, _ := strconv.Atoi(a["startup_phases.#"])
		var seen []string
		for i := 0; i < n; i++ {
			at := func(k string) string { return a[fmt.Sprintf("startup_phases.%d.%s", i, k)] }
			seen = append(seen, fmt.Sprintf("%s/%s=%s (%sms)", at("component"), at("phase"), at("outcome"), at("duration_ms")))
			if at("component") == component && at("phase") == phase && at("outcome") == outcome {
				return nil
			}
		}
		return fmt.Errorf("startup_phases %v lack %s/%s=%s", seen, component, phase, outcome)
	}
}

// realCodexConfig: a dedicated Codex agent (its own gateway beside the
// Codex app server) whose primary model is a custom Codex endpoint at the
// fake model's literal baseUrl (PR3, PR11), with a write-only api_key
// taken from TF_VAR_key that only the harness receives (AU6). Each of the
// two Pods requests its limits: one CPU each fits the real node's two.
func realCodexConfig(e realEnv, baseURL, timeout string) string {
	return e.provider + e.compute(`, cpu_limit = "1", memory_limit = "2Gi"`) + codexAgentConfig(baseURL, timeout)
}

// codexAgentConfig is realCodexConfig without its provider and compute:
// the configuration, the write-only key source and the agent, on
// occ_compute.k.
func codexAgentConfig(baseURL, timeout string) string {
	return fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "coder"
  document = jsonencode({
    agents = { defaults = { model = "codex/gpt-5-codex" } }
    models = { providers = { codex = {
      baseUrl = %q
      models  = [{ id = "gpt-5-codex", name = "GPT-5 Codex" }]
    } } }
  })
}
`+writeOnlyKeySource("openai")+`resource "occ_agent" "a" {
  name           = "coder"
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = "codex"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.s }
  timeouts       = { create = %q, update = %q, delete = "2m" }
}`, baseURL+"/v1", timeout, timeout)
}

// podLogs is every container log of the agent's Pods, through the API
// server (the real kubelet's log endpoint), by "pod/container".
func podLogs(ctx context.Context, e realEnv, agent string) (map[string]string, error) {
	cs := e.cluster.Clientset
	pods, err := cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + agent})
	if err != nil {
		return nil, err
	}
	logs := map[string]string{}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			rc, err := cs.CoreV1().Pods(e.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).Stream(ctx)
			if err != nil {
				return nil, err
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
			logs[p.Name+"/"+c.Name] = string(b)
		}
	}
	return logs, nil
}

// wsUpgrade opens a websocket handshake on conn, with the Authorization
// header when given and no Origin (the app server refuses browser
// origins), and returns the status.
func wsUpgrade(conn net.Conn, host, authorization string) (int, error) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if err := req.Write(conn); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestAccAgent_RealNodeDedicatedCodex: dedicated Codex on the real node
// (rules PR2, PR3, PR10, AU6, AU7). The harness's wrapper logs the real
// codex in with the agent's key and probes the custom endpoint (POST
// /v1/responses, inside the node's network), then becomes the app server,
// which admits only websocket clients with the capability token of the
// app-server token Secret. The gateway's Codex plugin (bundled in the
// openclaw image) connects to it through the NAME-harness Service with that
// token and reports the connection healthy; the apply returns with the
// agent active. A client without the token, or with another one, is
// refused by the app server through the same Service. The gateway never
// gets the key's Secret; neither the key nor the app-server token nor the
// gateway token is in state, plan or the TRACE logs.
func TestAccAgent_RealNodeDedicatedCodex(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	checkLogs := traceLogs(t)
	t.Setenv("TF_VAR_key", testSentinel)
	cs := env.cluster.Clientset
	var tokens []string // the tokens' values, once the apply made their Secrets
	var appToken string
	logsOnFailure := func() {
		if !t.Failed() {
			return
		}
		logs, err := podLogs(context.Background(), env, "coder")
		if err != nil {
			t.Logf("pod logs: %v", err)
		}
		for name, l := range logs {
			for _, s := range append([]string{testSentinel}, tokens...) {
				l = strings.ReplaceAll(l, s, "<secret>")
			}
			t.Logf("--- %s:\n%s", name, l)
		}
	}
	defer logsOnFailure()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:           realCodexConfig(env, srv.URL, "8m"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
			ConfigStateChecks: []statecheck.StateCheck{
				sentinelAbsentFromState{testSentinel},
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: func(s *terraform.State) error {
				ctx := context.Background()
				for name, key := range map[string]string{render.AppServerTokenSecret("coder"): render.AppServerTokenKey, render.GatewayTokenSecret("coder"): render.GatewayTokenKey} {
					sec, err := cs.CoreV1().Secrets(env.ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if v := sec.Data[key]; len(v) < 16 {
						return fmt.Errorf("secret %s holds a %s of %d bytes", name, key, len(v))
					}
					if name == render.AppServerTokenSecret("coder") {
						appToken = string(sec.Data[key])
					}
					tokens = append(tokens, string(sec.Data[key]))
				}
				// AU7: no token in the state either.
				for _, r := range s.RootModule().Resources {
					for k, v := range r.Primary.Attributes {
						for _, tok := range tokens {
							if strings.Contains(v, tok) {
								return fmt.Errorf("state %s.%s holds a token", r.Type, k)
							}
						}
					}
				}
				pods, err := cs.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=coder"})
				if err != nil {
					return err
				}
				components := map[string]string{}
				for _, p := range pods.Items {
					if p.Spec.NodeName != env.node.Name {
						return fmt.Errorf("pod %s ran on %q, not on the real node %q", p.Name, p.Spec.NodeName, env.node.Name)
					}
					components[p.Labels[render.LabelComponent]] = p.Name
					if p.Labels[render.LabelComponent] != render.ComponentGateway {
						continue
					}
					// AU6: the gateway gets its own token and the app
					// server's, never the model key's Secret.
					for _, c := range p.Spec.Containers {
						for _, e := range c.Env {
							if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil &&
								r.SecretKeyRef.Name != render.GatewayTokenSecret("coder") && r.SecretKeyRef.Name != render.AppServerTokenSecret("coder") {
								return fmt.Errorf("the gateway's %s comes from Secret %s", e.Name, r.SecretKeyRef.Name)
							}
						}
						if len(c.EnvFrom) > 0 {
							return fmt.Errorf("the gateway takes a whole Secret or ConfigMap as environment")
						}
					}
				}
				if len(pods.Items) != 2 || components[render.ComponentGateway] == "" || components[render.ComponentHarness] == "" {
					return fmt.Errorf("pods %v, want one gateway and one harness", components)
				}
				// PR2, PR3: the harness's probe called the custom endpoint
				// with the agent's key.
				probes := srv.ProbeRequests()
				if len(probes) == 0 {
					return fmt.Errorf("no probe request reached the model")
				}
				for _, p := range probes {
					if p.Method != http.MethodPost || p.Path != "/v1/responses" || p.Credential != testSentinel {
						return fmt.Errorf("probe request %s %s (with the key: %v), want POST /v1/responses with the agent's key", p.Method, p.Path, p.Credential == testSentinel)
					}
				}
				// AU6: the gateway's Codex plugin initialized the app
				// server over the authenticated websocket.
				gwLog := components[render.ComponentGateway] + "/gateway"
				deadline := time.Now().Add(2 * time.Minute)
				for {
					logs, err := podLogs(ctx, env, "coder")
					if err != nil {
						return err
					}
					if strings.Contains(logs[gwLog], "codex app-server remote WebSocket connection is healthy") {
						break
					}
					if strings.Contains(logs[gwLog], "Unexpected server response: 401") {
						return fmt.Errorf("the app server refused the gateway's Codex plugin")
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("the gateway never reported a healthy app-server connection")
					}
					time.Sleep(2 * time.Second)
				}
				// AU6: through the harness Service, the app server refuses a
				// client without the token or with another one, and admits
				// the one with it (so the refusals are the token's).
				svc, err := cs.CoreV1().Services(env.ns).Get(ctx, render.HarnessServiceName("coder"), metav1.GetOptions{})
				if err != nil {
					return err
				}
				addr := net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(render.AppServerPort))
				for _, c := range []struct {
					name, authorization string
					want                int
				}{
					{"no token", "", http.StatusUnauthorized},
					{"another token", "Bearer " + strings.Repeat("0", len(appToken)), http.StatusUnauthorized},
					{"the token", "Bearer " + appToken, http.StatusSwitchingProtocols},
				} {
					var status int
					deadline := time.Now().Add(60 * time.Second)
					for {
						dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						conn, err := env.node.DialInNode(dctx, "tcp", addr)
						cancel()
						if err == nil {
							status, err = wsUpgrade(conn, addr, c.authorization)
							conn.Close()
						}
						if err == nil {
							break
						}
						if time.Now().After(deadline) {
							return fmt.Errorf("the app server through the Service %s: %w", addr, err)
						}
						time.Sleep(500 * time.Millisecond)
					}
					if status != c.want {
						return fmt.Errorf("%s: websocket handshake through the Service %s: %d, want %d", c.name, addr, status, c.want)
					}
				}
				t.Logf("the app server behind %s refuses clients without the token", addr)
				return nil
			},
		}},
	})
	if len(tokens) != 2 {
		t.Fatalf("collected %d tokens, want the app-server and gateway tokens: the checks would prove nothing", len(tokens))
	}
	checkLogs(append([]string{testSentinel}, tokens...)...)
}

// rule MR3: an agent whose only primary model is its one entry's (no
// agents.defaults.model) runs on the real node: the real gateway starts
// with it and the wrapper probes that model with the agent's key.
func TestAccAgent_RealNodeEntryPrimary(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	config := strings.Replace(realAgentConfig(env, srv.URL, "6m"),
		`agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }`,
		`agents = { entries = { main = { model = "anthropic/claude-sonnet-4-5" } } }`, 1)
	if !strings.Contains(config, "entries = { main") {
		t.Fatal("the configuration was not rewritten")
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: func(*terraform.State) error {
				probes := srv.ProbeRequests()
				if len(probes) != 1 || probes[0].Credential != testSentinel {
					return fmt.Errorf("%d probe requests reached the model, want 1 with the agent's key", len(probes))
				}
				return nil
			},
		}},
	})
}
