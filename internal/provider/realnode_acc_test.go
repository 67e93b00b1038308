package provider

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/startup/fakemodel"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

// The acceptance tests on the real node: the provider's own runtime images
// (testenv/images.sh) run under a real kubelet, the real startup wrapper
// probes a model endpoint served inside the node's network namespace, and
// the real OpenClaw gateway starts. Nothing is simulated but the model.

// realEnv is a kubeEnv whose namespace runs on the real node.
type realEnv struct {
	kubeEnv
	node *testkube.RealNode
}

func newRealEnv(t *testing.T) realEnv {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests skipped unless env %s is set (the real node takes half a minute to start)", resource.EnvTfAcc)
	}
	c := testkube.Shared(t)
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
variable "key" {
  type      = string
  sensitive = true
}
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
resource "occ_credential_source" "s" {
  name             = "anthropic"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = var.key
  value_wo_version = 1
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness       = "openclaw"
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = %q, update = %q, delete = "2m" }
}`, baseURL, timeout, timeout)
}

// traceLogs turns on TF_LOG=TRACE into a directory and returns a check
// that none of the files holds any of the secrets (and that they were
// written at all).
func traceLogs(t *testing.T) func(secrets ...string) {
	dir := t.TempDir()
	t.Setenv("TF_LOG", "TRACE")
	t.Setenv("TF_LOG_PATH_MASK", dir+"/%s.log")
	return func(secrets ...string) {
		t.Helper()
		logs, err := os.ReadDir(dir)
		if err != nil || len(logs) == 0 {
			t.Fatalf("no trace log was written (%v): the check would prove nothing", err)
		}
		for _, l := range logs {
			b, err := os.ReadFile(filepath.Join(dir, l.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					t.Errorf("the trace log %s holds a secret (%d bytes)", l.Name(), len(s))
				}
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
			Check: func(*terraform.State) error {
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
			},
		}},
	})
	checkLogs(testSentinel)
}
