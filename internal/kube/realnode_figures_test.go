package kube

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// realRevision is an embedded OpenClaw agent whose Anthropic model is the
// fake endpoint at baseURL (inside the real node's namespace).
func realRevision(t *testing.T, ns, agent, baseURL string, cpuMillis int64) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(fmt.Sprintf(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}},
  models: {providers: {anthropic: {baseUrl: %q, api: "anthropic-messages", models: [{id: "claude-sonnet-4-5", name: "m"}]}}}}`, baseURL))
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: agent, Harness: admission.HarnessOpenClaw},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: cpuMillis, MemoryLimit: "1Gi"}},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}

// TestRealNode_Figures deploys embedded agents to the real node (the real
// wrapper, the real OpenClaw gateway) and prints the figures of issue 11:
// API requests per deploy, the time from the last Pod turning Ready (seen
// by an independent watch) to Deploy returning, and the wall time of the
// whole apply. One agent by default; OCC_FIGURES_AGENTS=20 deploys twenty
// at once (make bench-realnode). It asserts only that every revision
// activates.
func TestRealNode_Figures(t *testing.T) {
	agents := 1
	if v := os.Getenv("OCC_FIGURES_AGENTS"); v != "" {
		var err error
		if agents, err = strconv.Atoi(v); err != nil || agents < 1 {
			t.Fatalf("OCC_FIGURES_AGENTS=%q: want a positive number", v)
		}
	}
	c := kubeenv.Shared(t)
	node := c.RealNode(t)
	ns := c.RealNamespace(t)
	l, err := node.ListenInNode("tcp", node.NodeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.NewOn(l, fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()
	if _, err := c.Clientset.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "llm"}, StringData: map[string]string{"k": "sk-figures"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, counter := countedClient(t, c.Config, func(cfg *rest.Config) { cfg.QPS, cfg.Burst = 200, 400 })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// An independent observer of readiness, per agent.
	var mu sync.Mutex
	readyAt := map[string]time.Time{}
	w, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelComponent + "=" + render.ComponentGateway})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && kubeenv.PodReady(p) {
				mu.Lock()
				if _, seen := readyAt[p.Labels[render.LabelAgent]]; !seen {
					readyAt[p.Labels[render.LabelAgent]] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()

	// Twenty gateways share the node's two cores: each gets its share.
	cpu := int64(1000)
	if agents > 1 {
		cpu = max(1800/int64(agents), 50)
	}
	exec := &Executor{Client: cs}
	returned := make([]time.Time, agents)
	errs := make([]error, agents)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rev := realRevision(t, ns, fmt.Sprintf("fig-%d", i), srv.URL, cpu)
			_, errs[i] = exec.Apply(ctx, rev, 1, 0)
			returned[i] = time.Now()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Errorf("agent fig-%d: %v", i, err)
		}
	}
	if t.Failed() {
		t.Logf("--- kubelet ---\n%s", node.LogTail("kubelet", 20))
		return
	}
	var delays []time.Duration
	mu.Lock()
	for i := range agents {
		if r, ok := readyAt[fmt.Sprintf("fig-%d", i)]; ok {
			delays = append(delays, returned[i].Sub(r))
		}
	}
	mu.Unlock()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	fig := realRevision(t, ns, "fig-0", srv.URL, cpu)
	objs, _ := render.Kubernetes(fig, 1, admission.Compute{})
	objects := len(objs.ServiceAccounts) + len(objs.ConfigMaps) + len(objs.Deployments) + 3 // + the gateway token Secret, Service, audit Event
	objects += len(render.NetworkPolicies(fig, admission.NetworkPolicy{}, ""))              // the agent's NetworkPolicies
	logs := 0
	counter.mu.Lock()
	for _, r := range counter.reqs {
		if strings.HasSuffix(r, "/log") {
			logs++
		}
	}
	counter.mu.Unlock()
	total := int(counter.n.Load())
	t.Logf("real node, %d embedded agent(s) at %dm CPU each, the real wrapper and OpenClaw gateway:", agents, cpu)
	t.Logf("  apply (Deploy of every agent, in parallel): %s", wall.Round(10*time.Millisecond))
	t.Logf("  API requests per deploy: %.1f for %d objects (target: at most objects + 2 = %d), of which %.1f log stream requests",
		float64(total)/float64(agents), objects, objects+2, float64(logs)/float64(agents))
	if len(delays) > 0 {
		t.Logf("  last Pod Ready -> Deploy returned: min %s, median %s, max %s (target: within 100ms)",
			delays[0].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond))
	}
}
