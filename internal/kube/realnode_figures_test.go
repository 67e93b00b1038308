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
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// realRevision is an embedded OpenClaw agent whose Anthropic model is the
// fake endpoint at baseURL (inside the real node's namespace), with its
// chat completions endpoint on, for a turn.
func realRevision(t *testing.T, ns, agent, baseURL string, cpuMillis int64, memory string) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(fmt.Sprintf(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}},
  gateway: {http: {endpoints: {chatCompletions: {enabled: true}}}},
  models: {providers: {anthropic: {baseUrl: %q, api: "anthropic-messages", models: [{id: "claude-sonnet-4-5", name: "m"}]}}}}`, baseURL))
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: agent, Harness: admission.HarnessOpenClaw},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: cpuMillis, MemoryLimit: memory}},
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
// whole apply, and where the time from the first write to activation goes
// (the milestones of realnode_breakdown_test.go), then sends the first
// agent a turn at once and prints its time to the first answered token.
// One agent at 1 CPU by default; OCC_FIGURES_AGENTS=6 deploys six at once,
// sharing 1.8 CPUs (make bench-realnode; OpenClaw 2026.9.6 does not start
// at the 0.09 CPU each of twenty: its startup migrations time out, exit
// 78). OCC_FIGURES_CPU (millicores) and OCC_FIGURES_MEMORY (the first
// agent's) override the resources. It asserts only that every revision
// activates and that the turn is answered.
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

	// An independent observer of the Pods (readiness among them), per agent.
	pods := watchPodMilestones(ctx, t, c.Clientset, ns)

	// Several gateways share the node's two cores: each gets its share.
	cpu := int64(1000)
	if agents > 1 {
		cpu = max(1800/int64(agents), 50)
	}
	if v := os.Getenv("OCC_FIGURES_CPU"); v != "" {
		if cpu, err = strconv.ParseInt(v, 10, 64); err != nil || cpu < 1 {
			t.Fatalf("OCC_FIGURES_CPU=%q: want millicores", v)
		}
	}
	// The first agent answers a turn, which OpenClaw 2026.9.6 cannot do in
	// 1Gi (its container is OOM-killed mid-turn); the others only start,
	// and their memory requests must fit the node together.
	first := "2Gi"
	if v := os.Getenv("OCC_FIGURES_MEMORY"); v != "" {
		first = v
	}
	memory := func(i int) string {
		if i == 0 {
			return first
		}
		return "1Gi"
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
			rev := realRevision(t, ns, fmt.Sprintf("fig-%d", i), srv.URL, cpu, memory(i))
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
		if pl, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=fig-0"}); err == nil && len(pl.Items) > 0 {
			tail := int64(40)
			b, _ := c.Clientset.CoreV1().Pods(ns).GetLogs(pl.Items[0].Name, &corev1.PodLogOptions{Container: render.ComponentGateway, Previous: true, TailLines: &tail}).DoRaw(ctx)
			t.Logf("--- fig-0's gateway, its last run ---\n%s", b)
		}
		return
	}
	// The first agent's first turn, sent the moment its Deploy returned
	// (the others' Deploys have returned too by now; with one agent, at
	// once).
	turnSent := time.Now()
	ttft, turnErr := firstTurn(ctx, c.Clientset, node, ns, "fig-0")
	var delays []time.Duration
	per := make([]milestones, agents)
	for i := range agents {
		name := fmt.Sprintf("fig-%d", i)
		per[i] = pods.of(name)
		if r, ok := per[i][msPodReady]; ok {
			delays = append(delays, returned[i].Sub(r))
		}
		logged, err := gatewayLogMilestones(ctx, c.Clientset, ns, name)
		if err != nil {
			t.Errorf("agent %s: its gateway's log: %v", name, err)
		}
		per[i].merge(logged)
		per[i].see(msActivated, returned[i])
	}
	if turnErr != nil {
		t.Errorf("the first turn of fig-0: %v", turnErr)
		if p, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=fig-0"}); err == nil {
			for _, p := range p.Items {
				for _, st := range p.Status.ContainerStatuses {
					t.Logf("  %s/%s: %d restart(s), last state %+v", p.Name, st.Name, st.RestartCount, st.LastTerminationState)
				}
			}
		}
	} else {
		per[0].see(msFirstToken, turnSent.Add(ttft))
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	fig := realRevision(t, ns, "fig-0", srv.URL, cpu, memory(0))
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
	logBreakdown(t, start, per)
	if turnErr == nil {
		t.Logf("  first answered token of fig-0: %s after its activation (the turn sent %s after it)",
			turnSent.Add(ttft).Sub(returned[0]).Round(10*time.Millisecond), turnSent.Sub(returned[0]).Round(10*time.Millisecond))
	}
	if len(delays) > 0 {
		t.Logf("  last Pod Ready -> Deploy returned: min %s, median %s, max %s (target: within 100ms)",
			delays[0].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond))
	}
}
