package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/startup/fakemodel"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

// realSandboxEnv is a sandboxEnv whose namespace runs on the real node:
// the Pods the test sandbox driver provisions run under the real kubelet
// too.
type realSandboxEnv struct {
	sandboxEnv
	real realEnv
}

func newRealSandboxEnv(t *testing.T) realSandboxEnv {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests skipped unless env %s is set (the real node takes half a minute to start)", resource.EnvTfAcc)
	}
	c := testkube.Shared(t)
	node := c.RealNode(t)
	env := newSandboxEnvIn(t, c, c.RealNamespace(t))
	return realSandboxEnv{sandboxEnv: env, real: realEnv{kubeEnv: env.kubeEnv, node: node}}
}

// realNativeConfig: dedicated native OpenClaw on a compute with the test
// sandbox driver, its primary model OpenAI at the fake endpoint's literal
// baseUrl (PR11), its write-only key from TF_VAR_key. Each runtime
// container gets 900m: the gateway Pod (gateway and broker) and the node
// Pod fit the real node's two cores together.
func realNativeConfig(e realSandboxEnv, baseURL string, workers int) string {
	return e.provider + e.sandboxCompute("k", fmt.Sprintf(`cpu_limit = "900m"
    node_workers = %d`, workers)) + fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "native"
  document = jsonencode({
    agents = { defaults = { model = "openai/gpt-5" } }
    models = { providers = { openai = {
      baseUrl = %q
      api     = "openai-responses"
      models  = [{ id = "gpt-5", name = "GPT-5" }]
    } } }
  })
}
`+writeOnlyKeySource("openai")+`resource "occ_agent" "a" {
  name           = "native"
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = "openclaw"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.s }
  timeouts       = { create = "10m", update = "10m", delete = "3m" }
}`, baseURL+"/v1")
}

// secretsAbsentFromState fails when the state holds any of the secrets a
// step's Check collected (they are known only once the apply ran).
type secretsAbsentFromState struct{ secrets *[]string }

func (c secretsAbsentFromState) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	b, err := json.Marshal(req.State)
	if err != nil {
		resp.Error = err
		return
	}
	if len(*c.secrets) == 0 {
		resp.Error = fmt.Errorf("no secrets were collected: the check would prove nothing")
	}
	for _, s := range *c.secrets {
		if s == "" || strings.Contains(string(b), s) {
			resp.Error = fmt.Errorf("the state holds a secret (%d bytes)", len(s))
		}
	}
}

// containerLog is a container's log through the API server (the kubelet's
// log endpoint on the real node).
func containerLog(ctx context.Context, e realSandboxEnv, pod, container string) (string, error) {
	rc, err := e.cluster.Clientset.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// checkSecretFile: the file of a Secret volume, as the real kubelet wrote
// it on the node, has the mode the Pod template asks for, root's owner and
// the Pod's fsGroup: the runtime user reads it through its group alone.
func checkSecretFile(e realSandboxEnv, pod *corev1.Pod, volume, file string) error {
	var want os.FileMode
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.Secret != nil && v.Secret.DefaultMode != nil {
			want = os.FileMode(*v.Secret.DefaultMode)
		}
	}
	if pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil {
		return fmt.Errorf("pod %s has no fsGroup", pod.Name)
	}
	path := filepath.Join(e.real.node.Dir, "kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~secret", volume, file)
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("the %s volume on the node: %w", volume, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != want || st.Uid != 0 || int64(st.Gid) != *pod.Spec.SecurityContext.FSGroup {
		return fmt.Errorf("the kubelet wrote %s/%s as %v %d:%d; the Pod template asks for %v root:%d",
			volume, file, fi.Mode().Perm(), st.Uid, st.Gid, want, *pod.Spec.SecurityContext.FSGroup)
	}
	return nil
}

func containerReady(pod *corev1.Pod, name string) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.Ready
		}
	}
	return false
}

// TestAccAgent_RealNodeNativeOpenClaw: dedicated native OpenClaw with the
// test sandbox driver, on the real node (rules ND2, ND3, ND4, PR1, AC2,
// AU7). The node Pod's wrapper probes the fake model with the agent's key,
// redeems its one-use target at the enrollment broker through the internal
// gateway Service by its DNS name (CoreDNS, kube-proxy, the not yet ready
// gateway listed by publishNotReadyAddresses), and `openclaw connect
// --ephemeral --target-file` pairs with the real gateway without a human;
// the broker turns ready with the node, so the gateway's Pod and the
// revision do, the apply returns with the agent active and its Service
// serves the gateway. A new revision stops the first, enrolls a new node
// with a new target and activates. Neither the model key, nor an
// enrollment token, nor the gateway token is in the state, the plan, a
// runtime log or a TRACE log.
func TestAccAgent_RealNodeNativeOpenClaw(t *testing.T) {
	env := newRealSandboxEnv(t)
	srv := env.real.model(t, fakemodel.Step{Kind: fakemodel.OK})
	checkLogs := traceLogs(t)
	t.Setenv("TF_VAR_key", testSentinel)
	secrets := []string{testSentinel}
	step := func(workers int, n int64) resource.TestStep {
		return resource.TestStep{
			Config:           realNativeConfig(env, srv.URL, workers),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
			Check: func(*terraform.State) error {
				found, err := checkRealNative(t, env, srv, n)
				secrets = append(secrets, found...)
				return err
			},
			ConfigStateChecks: []statecheck.StateCheck{
				secretsAbsentFromState{&secrets},
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(n)),
			},
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    []resource.TestStep{step(2, 1), step(3, 2)},
		CheckDestroy: func(*terraform.State) error {
			// Destroy returns once the real kubelet has stopped every Pod.
			ctx := context.Background()
			sbs, err := env.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(env.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=native"})
			if err != nil {
				return err
			}
			if len(sbs.Items)+len(pods.Items) != 0 {
				return fmt.Errorf("after destroy: %d Sandboxes, %d Pods", len(sbs.Items), len(pods.Items))
			}
			return nil
		},
	})
	checkLogs(secrets...)
}

// checkRealNative checks revision n of the native agent on the real node;
// it returns the secrets it read (the revision's enrollment token, the
// gateway token) for the state and log checks.
func checkRealNative(t *testing.T, env realSandboxEnv, srv *fakemodel.Server, n int64) ([]string, error) {
	ctx := context.Background()
	cs := env.cluster.Clientset
	pods, err := env.podsByComponent(fmt.Sprintf("%s=native,%s=%d", render.LabelAgent, render.LabelRevision, n))
	if err != nil {
		return nil, err
	}
	gw, node := pods[render.ComponentGateway], pods[render.ComponentNode]
	if gw == nil || node == nil {
		return nil, fmt.Errorf("revision %d pods: gateway %v node %v", n, gw != nil, node != nil)
	}
	for _, p := range []*corev1.Pod{gw, node} {
		if p.Spec.NodeName != env.real.node.Name {
			return nil, fmt.Errorf("pod %s ran on %q, not on the real node %q", p.Name, p.Spec.NodeName, env.real.node.Name)
		}
	}
	if owner := metav1.GetControllerOf(node); owner == nil || owner.Kind != "Sandbox" || owner.Name != render.NodeSandboxName("native", n) {
		return nil, fmt.Errorf("the node Pod is not provisioned by the sandbox driver for its Sandbox: %+v", owner)
	}
	target, err := cs.CoreV1().Secrets(env.ns).Get(ctx, render.EnrollmentSecretName("native", n), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	tg, err := enrollment.Decode(target.Data[render.EnrollmentFile])
	if err != nil {
		return nil, err
	}
	gwToken, err := cs.CoreV1().Secrets(env.ns).Get(ctx, render.GatewayTokenSecret("native"), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	secrets := []string{tg.Token, string(gwToken.Data[render.GatewayTokenKey])}
	// ND2: the node redeems its target at the broker by the internal
	// Service's DNS name.
	if want := fmt.Sprintf("http://%s:%d%s", render.GatewayHost("native", env.ns), render.EnrollPort, enrollment.Path); tg.URL != want {
		return secrets, fmt.Errorf("the enrollment target's URL is %q, want %q", tg.URL, want)
	}
	// PR1, ND4: each revision's node wrapper probed the model with the key.
	probes := srv.ProbeRequests()
	if int64(len(probes)) != n {
		return secrets, fmt.Errorf("%d probe requests reached the model after revision %d, want %d", len(probes), n, n)
	}
	for _, p := range probes {
		if p.Credential != testSentinel {
			return secrets, fmt.Errorf("a probe did not carry the agent's key")
		}
	}
	// ND3: the broker is ready because the node paired and connected, and
	// the node says it connected to its gateway's DNS name.
	if !containerReady(gw, "enrollment") || !containerReady(gw, "gateway") {
		return secrets, fmt.Errorf("the gateway Pod's containers are not ready: %+v", gw.Status.ContainerStatuses)
	}
	logs := map[string]string{}
	for _, c := range [][2]string{{gw.Name, "gateway"}, {gw.Name, "enrollment"}, {node.Name, "node"}} {
		if logs[c[1]], err = containerLog(ctx, env, c[0], c[1]); err != nil {
			return secrets, fmt.Errorf("the %s's log: %w", c[1], err)
		}
	}
	for _, outcome := range []string{`"outcome":"issued"`, `"outcome":"paired"`} {
		if !strings.Contains(logs["enrollment"], outcome) {
			return secrets, fmt.Errorf("the broker's log lacks %s:\n%s", outcome, logs["enrollment"])
		}
	}
	if want := fmt.Sprintf("node host gateway connected: ws://%s:%d", render.GatewayHost("native", env.ns), render.GatewayPort); !strings.Contains(logs["node"], want) {
		return secrets, fmt.Errorf("the node's log does not say %q:\n%s", want, logs["node"])
	}
	// The gateway starts offline: it fetches no model catalog.
	if strings.Contains(logs["gateway"], "remote model catalog") {
		return secrets, fmt.Errorf("the gateway refreshes its model catalog from the network:\n%s", logs["gateway"])
	}
	for name, l := range logs {
		for _, s := range append([]string{testSentinel}, secrets...) {
			if strings.Contains(l, s) {
				return secrets, fmt.Errorf("the %s's log holds a secret (%d bytes)", name, len(s))
			}
		}
	}
	// Under the real kubelet: no container restarted on its way to ready
	// (a crash and a retry would hide a wrong mount or option), and the
	// Secret files are what render says.
	for _, p := range []*corev1.Pod{gw, node} {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount != 0 {
				return secrets, fmt.Errorf("container %s of %s restarted %d times (last: %+v)", st.Name, p.Name, st.RestartCount, st.LastTerminationState)
			}
		}
	}
	if err := checkSecretFile(env, node, "enrollment", render.EnrollmentFile); err != nil {
		return secrets, err
	}
	if err := checkSecretFile(env, gw, "enrollment-verifier", render.VerifierFile); err != nil {
		return secrets, err
	}
	// AC2: only this revision runs, and the earlier one's enrollment is gone.
	all, err := cs.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=native"})
	if err != nil {
		return secrets, err
	}
	for _, p := range all.Items {
		if p.Labels[render.LabelRevision] != fmt.Sprint(n) {
			return secrets, fmt.Errorf("pod %s of revision %s still runs beside revision %d", p.Name, p.Labels[render.LabelRevision], n)
		}
	}
	if n > 1 {
		if _, err := cs.CoreV1().Secrets(env.ns).Get(ctx, render.EnrollmentSecretName("native", n-1), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return secrets, fmt.Errorf("revision %d's enrollment target after revision %d activated: %v", n-1, n, err)
		}
	}
	// The agent's Service serves this revision's gateway.
	svc, err := cs.CoreV1().Services(env.ns).Get(ctx, render.ServiceName("native"), metav1.GetOptions{})
	if err != nil {
		return secrets, err
	}
	if got := svc.Spec.Selector[render.LabelRevision]; got != fmt.Sprint(n) {
		return secrets, fmt.Errorf("the agent's Service selects revision %q, want %d", got, n)
	}
	body, err := readyzThrough(env.real, svc.Spec.ClusterIP)
	if err != nil {
		return secrets, err
	}
	t.Logf("revision %d: node %s enrolled with %s through %s; /readyz through the Service: %s", n, node.Name, gw.Name, tg.URL, body)
	return secrets, nil
}

// readyzThrough fetches the gateway's /readyz at a Service ClusterIP from
// inside the node, waiting for kube-proxy to program a new Service.
func readyzThrough(e realEnv, clusterIP string) (string, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := e.httpClient().Get(fmt.Sprintf("http://%s:%d/readyz", clusterIP, render.GatewayPort))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("the gateway's /readyz through the Service: %d %s", resp.StatusCode, body)
			}
			return string(body), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the gateway's /readyz through the Service: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
