package kube

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }

// countingTransport counts the API requests a deploy makes.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
	mu   sync.Mutex
	reqs []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// countedClient is a clientset on cfg (copied; tune changes the copy)
// whose requests the returned transport counts.
func countedClient(tb testing.TB, cfg *rest.Config, tune func(*rest.Config)) (*kubernetes.Clientset, *countingTransport) {
	tb.Helper()
	cfg = rest.CopyConfig(cfg)
	counter := &countingTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	if tune != nil {
		tune(cfg)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cs, counter
}

// countedExecutor is New on cfg (copied) with a transport that counts
// every request the executor makes.
func countedExecutor(tb testing.TB, cfg *rest.Config) (*Executor, *countingTransport) {
	tb.Helper()
	cfg = rest.CopyConfig(cfg)
	counter := &countingTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	ex, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return ex, counter
}

func testRevision(t testing.TB, ns string, annotations map[string]string) *admission.Revision {
	t.Helper()
	return namedRevision(t, "bench", ns, annotations)
}

// namedRevision is testRevision for agent name.
func namedRevision(t testing.TB, name, ns string, annotations map[string]string) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: name},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi", PodAnnotations: annotations}},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}

// BenchmarkDeploy_Figures deploys one embedded revision to the real
// control plane per iteration, each in a fresh namespace, and reports what
// the targets are measured on: API requests per deploy (target: at most
// the revision's objects + 2), apart from them the log stream reconnects
// kwok's simulated runtime causes, and the time from the last Pod turning
// Ready (seen by an independent watch) to Deploy returning (target: within
// 100ms). ns/op is the whole Deploy; with -v the first deploy's
// requests are logged. It fails only when the revision does not activate.
//
//	go test ./internal/kube -run '^$' -bench BenchmarkDeploy_Figures
func BenchmarkDeploy_Figures(b *testing.B) {
	c := kubeenv.Shared(b)
	var own, reconnects, objects, noticed int
	var delay time.Duration
	first := true
	var requests []string // the first deploy's
	for b.Loop() {
		b.StopTimer()
		ns := c.TestNamespace(b)
		cs, counter := countedClient(b, c.Config, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		// An independent observer of readiness.
		readyAt := make(chan time.Time, 1)
		w, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && kubeenv.PodReady(p) {
					readyAt <- time.Now()
					return
				}
			}
		}()
		exec := &Executor{Client: cs}
		rev := testRevision(b, ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 2*time.Second))
		b.StartTimer()

		res, err := exec.Apply(ctx, rev, 1, 0)
		returned := time.Now()

		b.StopTimer()
		if err != nil {
			cancel()
			b.Fatalf("deploy: %v", err)
		}
		if res.ActivatedAt.IsZero() || res.Endpoint == "" {
			cancel()
			b.Fatalf("result %+v", res)
		}
		objs, _ := render.Kubernetes(rev, 1, admission.Compute{})
		objects = len(objs.ServiceAccounts) + len(objs.ConfigMaps) + len(objs.Deployments) + 3 // + the gateway token Secret, Service, audit Event
		objects += len(render.NetworkPolicies(rev, admission.NetworkPolicy{}, ""))             // the agent's NetworkPolicies
		// A kubelet keeps a follow=true log stream open while the container
		// runs; kwok's simulated logs end the stream at once, so the executor
		// reconnects (with backoff) until the Pod is Ready. Those reconnects
		// are counted apart from the deploy's own requests.
		counter.mu.Lock()
		logs := 0
		for _, r := range counter.reqs {
			if strings.HasSuffix(r, "/log") {
				logs++
			}
			if first {
				requests = append(requests, r)
			}
		}
		counter.mu.Unlock()
		first = false
		own += int(counter.n.Load()) - max(logs-1, 0)
		reconnects += max(logs-1, 0)
		select {
		case r := <-readyAt:
			delay += returned.Sub(r)
			noticed++
		case <-time.After(5 * time.Second):
			b.Log("the independent watch did not see the Pod turn Ready")
		}
		cancel()
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(own)/n, "requests/op")
	b.ReportMetric(float64(objects), "objects")
	b.ReportMetric(float64(reconnects)/n, "log-reconnects/op")
	avg := time.Duration(0)
	if noticed > 0 {
		avg = delay / time.Duration(noticed)
		b.ReportMetric(float64(avg.Microseconds())/1000, "ready-to-return-ms/op")
	}
	b.Logf("API requests per deploy: %.1f for %d objects (target: at most objects + 2 = %d), plus %.1f log stream reconnects caused by the simulated runtime",
		float64(own)/n, objects, objects+2, float64(reconnects)/n)
	b.Logf("activation noticed %s after the Pod turned Ready (mean of %d; target: within 100ms)", avg.Round(time.Millisecond), noticed)
	if testing.Verbose() {
		b.Logf("the first deploy's requests:\n  %s", strings.Join(requests, "\n  "))
	}
}

// rules PR6, PR7, PR8: every held code on a container's log fails the deploy
// at once, with the record's structured fields, without waiting for the
// deadline; the Service is never created.
func TestPR8_HeldCodesFailAtOnce(t *testing.T) {
	c := kubeenv.Shared(t)
	cases := []struct {
		code   executor.Code
		record string
		check  func(*Failure) bool
	}{
		{"AUTHENTICATION_FAILED", `{"event":"openclaw.model_probe","container":"gateway","code":"AUTHENTICATION_FAILED","final":true,"providerCode":401,"responseHeaderMarker":["www-authenticate"],"bodyShape":"json-error-code","providerErrorCode":"invalid_api_key","providerErrorType":"other"}`,
			func(f *Failure) bool {
				return f.Record.ProviderCode == 401 && f.Record.BodyShape == "json-error-code" && f.Record.ProviderErrorCode == "invalid_api_key"
			}},
		{"MODEL_PROBE_TIMEOUT", `{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_TIMEOUT","final":true}`, nil},
		{"MODEL_PROBE_FAILED", `{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_FAILED","final":true,"causeKind":"provider_error","causeDetail":"http_5xx"}`,
			func(f *Failure) bool {
				return f.Record.CauseKind == "provider_error" && f.Record.CauseDetail == "http_5xx"
			}},
		{"MODEL_PROBE_CPU_STARVED", `{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_CPU_STARVED","final":true}`, nil},
		{"UNAVAILABLE", `{"event":"codex.model_probe","container":"gateway","attempt":2,"exitCode":1,"code":"UNAVAILABLE","final":true,"failureClass":"server_error"}`,
			func(f *Failure) bool {
				return f.Record.Attempt == 2 && *f.Record.ExitCode == 1 && f.Record.FailureClass == "server_error"
			}},
		{"LOGIN_FAILED", `{"event":"runtime.startup_phase","container":"gateway","phase":"login","outcome":"failed","code":"LOGIN_FAILED","failureClass":"network"}`,
			func(f *Failure) bool { return f.Record.FailureClass == "network" }},
	}
	for _, tc := range cases {
		t.Run(string(tc.code), func(t *testing.T) {
			ns := c.TestNamespace(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			go func() {
				for ctx.Err() == nil {
					pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
					if err == nil && len(pods.Items) > 0 {
						_ = c.SetPodLogs(ctx, ns, pods.Items[0].Name, "gateway", []string{`{"time":"x","level":"info","message":"starting"}`, tc.record})
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			start := time.Now()
			_, err := (&Executor{Client: c.Clientset}).Apply(ctx, testRevision(t, ns, kubeenv.Behavior(kubeenv.BehaviorNeverReady, 0)), 1, 0)
			f, ok := err.(*Failure)
			if !ok || f.Code != tc.code || f.Record == nil || f.Next == "" || f.Component != "gateway" {
				t.Fatalf("deploy error = %v, want a %s failure with its record, container and advice", err, tc.code)
			}
			if tc.check != nil && !tc.check(f) {
				t.Errorf("record fields lost: %+v", *f.Record)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the held code took %s: the deploy waited for something else", d)
			}
			if _, err := c.Clientset.CoreV1().Services(ns).Get(ctx, "bench", metav1.GetOptions{}); err == nil {
				t.Error("a held revision was activated")
			}
		})
	}
}

func serviceRevision(t *testing.T, c *kubeenv.Cluster, ns string) string {
	t.Helper()
	svc, err := c.Clientset.CoreV1().Services(ns).Get(context.Background(), "bench", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read Service: %v", err)
	}
	return svc.Spec.Selector[render.LabelRevision]
}

// rule AC3: a failed replacement leaves the Service on the revision it
// served, and an older revision can never take the Service back.
func TestAC3_GuardedActivation(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return testRevision(t, ns, nil) })
	// Revision 2 never becomes ready: it fails at its deadline, and the
	// Service keeps selecting revision 1.
	short, cancelShort := context.WithTimeout(ctx, 4*time.Second)
	defer cancelShort()
	_, err := exec.Apply(short, testRevision(t, ns, kubeenv.Behavior(kubeenv.BehaviorNeverReady, 0)), 2, 1)
	if f, ok := err.(*Failure); !ok || f.Code != executor.Deadline || f.Phase == "" || !f.Wrote {
		t.Fatalf("revision 2 error = %v, want a deadline failure naming the last phase, after writing", err)
	}
	if got := serviceRevision(t, c, ns); got != "1" {
		t.Fatalf("after a failed replacement the Service selects revision %s, want 1", got)
	}
	// Revision 3 activates; a stale apply of revision 2 cannot move the Service back.
	if _, err := exec.Apply(ctx, testRevision(t, ns, map[string]string{"example.com/r": "3"}), 3, 1); err != nil {
		t.Fatalf("revision 3: %v", err)
	}
	_, err = exec.Apply(ctx, testRevision(t, ns, map[string]string{"example.com/r": "2"}), 2, 1)
	var f *Failure
	if !errors.As(err, &f) || f.Code != executor.Stale || f.Wrote {
		t.Fatalf("stale revision 2 error = %v, want %s before any write", err, executor.Stale)
	}
	if got := serviceRevision(t, c, ns); got != "3" {
		t.Fatalf("a stale apply moved the Service to revision %s", got)
	}
	// Nor did it touch the workloads revision 3 runs on.
	d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Labels[render.LabelRevision] != "3" || d.Spec.Template.Annotations["example.com/r"] != "3" {
		t.Fatalf("a stale apply rewrote the gateway Deployment: template labels %v annotations %v", d.Spec.Template.Labels, d.Spec.Template.Annotations)
	}
}

// An image that cannot be pulled, or a container the kubelet cannot
// configure (a missing Secret), fails at once with the kubelet's reason.
func TestDeploy_WaitingFailuresFailFast(t *testing.T) {
	for _, tc := range []struct {
		behavior string
		code     executor.Code
		reason   string
	}{
		{kubeenv.BehaviorImagePullBackOff, executor.ImagePull, "ImagePullBackOff"},
		{kubeenv.BehaviorContainerConfigError, executor.ContainerConfig, `CreateContainerConfigError: secret "missing-secret" not found`},
	} {
		t.Run(tc.behavior, func(t *testing.T) {
			t.Parallel()
			c := kubeenv.Shared(t)
			ns := c.TestNamespace(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			_, err := (&Executor{Client: c.Clientset}).Apply(ctx, testRevision(t, ns, kubeenv.Behavior(tc.behavior, 0)), 1, 0)
			f, ok := err.(*Failure)
			if !ok || f.Code != tc.code || f.Next == "" || !strings.Contains(f.Reason, tc.reason) {
				t.Fatalf("deploy error = %v, want %s with the reason %q and advice", err, tc.code, tc.reason)
			}
			t.Logf("failed after %s: %s", time.Since(start).Round(100*time.Millisecond), f.Reason)
		})
	}
}

func codexRevision(t *testing.T, ns, model string) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "` + model + `"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "bench", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi"}},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}

// rules AC2, PR10: a dedicated replacement stops every earlier revision
// before the new one's Pods exist; a first dedicated deploy's Service exists
// while the revision starts.
func TestAC2_DedicatedReplacementStopsEarlierRevisionsFirst(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return codexRevision(t, ns, "codex/gpt-5-codex") })
	// Watch Pods and Deployments: every Pod of revision 1 must be deleted
	// before any workload is changed to revision 2. The two watches are
	// separate streams, so the order is judged by resourceVersion at the
	// end, not by which event arrived first (both come from the test's one
	// etcd, whose revisions increase).
	var mu sync.Mutex
	rev1 := map[string]int64{} // pod of revision 1 -> resourceVersion of its deletion (0: not deleted)
	seen1 := map[string]bool{} // components with a Pod of revision 1 seen
	var changedAt []int64      // resourceVersions of workload changes to revision 2
	rv := func(o metav1.Object) int64 { n, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64); return n }
	pw, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	dw, err := c.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	go func() {
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Labels[render.LabelRevision] != "1" {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				rev1[p.Name] = rv(p)
			} else if _, known := rev1[p.Name]; !known {
				rev1[p.Name] = 0
				seen1[p.Labels[render.LabelComponent]] = true
			}
			mu.Unlock()
		}
	}()
	go func() {
		for ev := range dw.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type != watch.Modified || d.Spec.Template.Labels[render.LabelRevision] != "2" {
				continue
			}
			mu.Lock()
			changedAt = append(changedAt, rv(d))
			mu.Unlock()
		}
	}()
	// The check is armed only once the Pod watch has reported revision 1's
	// Pods (its initial events): both the gateway and the harness.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		seen := maps.Clone(seen1)
		mu.Unlock()
		if seen[render.ComponentGateway] && seen[render.ComponentHarness] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Pod watch saw revision 1 Pods of %v, want the gateway's and the harness's: nothing would be checked", seen)
		}
	}
	if _, err := exec.Apply(ctx, codexRevision(t, ns, "codex/gpt-5.1-codex"), 2, 1); err != nil {
		t.Fatalf("revision 2: %v", err)
	}
	// Let both watches deliver what happened before Apply returned.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		done := len(changedAt) > 0 && !slices.Contains(slices.Collect(maps.Values(rev1)), 0)
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changedAt) == 0 {
		t.Fatal("the Deployment watch saw no workload change to revision 2: nothing was checked")
	}
	first := slices.Min(changedAt)
	for name, deleted := range rev1 {
		switch {
		case deleted == 0:
			t.Errorf("Pod %s of revision 1 still runs after revision 2 activated", name)
		case deleted > first:
			t.Errorf("a workload changed to revision 2 (resourceVersion %d) while Pod %s of revision 1 ran (deleted at %d)", first, name, deleted)
		}
	}
	if got := serviceRevision(t, c, ns); got != "2" {
		t.Fatalf("Service selects revision %s, want 2", got)
	}
}

// A Pod the API server refuses to create (here: a ResourceQuota that admits
// no Pods) fails the deploy with the reason, long before the deadline.
func TestDeploy_ReplicaFailureFailsFast(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := c.Clientset.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The quota admits or refuses only once the quota controller has
	// computed its status; before that (a fresh cluster, the test run
	// alone) the Pod is created.
	for {
		q, err := c.Clientset.CoreV1().ResourceQuotas(ns).Get(ctx, "no-pods", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := q.Status.Hard[corev1.ResourcePods]; ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the quota controller never computed the quota's status")
		case <-time.After(100 * time.Millisecond):
		}
	}
	start := time.Now()
	_, err := (&Executor{Client: c.Clientset}).Apply(ctx, testRevision(t, ns, nil), 1, 0)
	f, ok := err.(*Failure)
	if !ok || f.Code != executor.ReplicaFailure || !strings.Contains(f.Reason, "quota") {
		t.Fatalf("error = %T %v, want %s naming the quota", err, err, executor.ReplicaFailure)
	}
	t.Logf("failed after %s: %s", time.Since(start).Round(100*time.Millisecond), f.Reason)
}

// A compute whose priority_class_name names no PriorityClass: the API
// server's Priority admission refuses every Pod, and the deploy fails
// with REPLICA_FAILURE naming the class, long before the deadline.
func TestDeploy_MissingPriorityClassFailsFast(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "bench"},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi", PriorityClassName: "agents-missing"}},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	start := time.Now()
	_, err = (&Executor{Client: c.Clientset}).Apply(ctx, rev, 1, 0)
	f, ok := err.(*Failure)
	if !ok || f.Code != executor.ReplicaFailure || !strings.Contains(f.Reason, "agents-missing") || !strings.Contains(f.Next, "priority_class_name") {
		t.Fatalf("error = %v, want %s naming the PriorityClass and priority_class_name", err, executor.ReplicaFailure)
	}
	t.Logf("failed after %s: %s", time.Since(start).Round(100*time.Millisecond), f.Reason)
}

// rule AU6: switching an Agent from a dedicated Codex harness to embedded
// OpenClaw (an in-place update) leaves no harness behind: once the
// embedded revision is activated, the earlier harness Deployment, which
// holds the model credential, is gone.
func TestAU6_SwitchToEmbeddedRetiresTheDedicatedHarness(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return codexRevision(t, ns, "codex/gpt-5-codex") })
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"}
	before, err := c.Clientset.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil || len(before.Items) != 2 {
		t.Fatalf("dedicated revision: %d Deployments (%v), want gateway and harness", len(before.Items), err)
	}
	if _, err := exec.Apply(ctx, testRevision(t, ns, nil), 2, 1); err != nil {
		t.Fatalf("revision 2 (embedded): %v", err)
	}
	after, err := c.Clientset.AppsV1().Deployments(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range after.Items {
		names = append(names, d.Name+"@r"+d.Labels[render.LabelRevision])
	}
	if len(after.Items) != 1 || after.Items[0].Name != render.GatewayName("bench") || after.Items[0].Labels[render.LabelRevision] != "2" {
		t.Fatalf("after the switch to embedded: Deployments %v, want only %s of revision 2", names, render.GatewayName("bench"))
	}
}

// rule AC4: an apply that activated a revision but never recorded it (the
// provider crashed, the connection dropped) is repeated by the next apply
// with the same serving revision: recovery keeps the activation time and
// writes no second audit record.
func TestAC4_RecoveryRepeatsOnlySafeEffects(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return testRevision(t, ns, nil) })
	rev2 := testRevision(t, ns, map[string]string{"example.com/r": "2"})
	first, err := exec.Apply(ctx, rev2, 2, 1)
	if err != nil {
		t.Fatalf("revision 2: %v", err)
	}
	time.Sleep(1100 * time.Millisecond) // a new activation would get a later second
	again, err := exec.Apply(ctx, rev2, 2, 1)
	if err != nil {
		t.Fatalf("revision 2 repeated: %v", err)
	}
	if !again.ActivatedAt.Equal(first.ActivatedAt) {
		t.Errorf("recovery moved the activation time from %s to %s", first.ActivatedAt, again.ActivatedAt)
	}
	evs, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelRevision + "=2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Reason != "RevisionActivated" {
		t.Fatalf("%d audit records for revision 2, want exactly 1", len(evs.Items))
	}
	if got := serviceRevision(t, c, ns); got != "2" {
		t.Fatalf("Service selects revision %s, want 2", got)
	}
}

// firstRevision deploys revision 1, made by rev for a fresh namespace, and
// returns the cluster, the namespace, the executor and a context that ends
// with the test.
func firstRevision(t *testing.T, rev func(ns string) *admission.Revision) (*kubeenv.Cluster, string, *Executor, context.Context) {
	t.Helper()
	c, exec, compute, ctx := liveExecutor(t, 90*time.Second)
	ns := compute.Kubernetes().Namespace
	if _, err := exec.Apply(ctx, rev(ns), 1, 0); err != nil {
		t.Fatalf("revision 1: %v", err)
	}
	return c, ns, exec, ctx
}

// rule HM4: an unsandboxed dedicated Codex gateway reaches its harness by
// the Service the gateway document names. The executor applies it before
// either workload (the gateway waits for its peer from its first start),
// moves it to each new revision's harness, retires it on a switch to
// embedded, and a destroy removes it.
func TestHM4_HarnessServiceFollowsTheHarness(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	cs, counter := countedClient(t, c.Config, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exec := &Executor{Client: cs}
	name := render.HarnessServiceName("bench")
	harnessSelects := func(n string) {
		t.Helper()
		svc, err := c.Clientset.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("revision %s: harness Service: %v", n, err)
		}
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != render.AppServerPort {
			t.Errorf("revision %s: harness Service %s %s ports %v, want a ClusterIP on %d", n, svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.Ports, render.AppServerPort)
		}
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			t.Fatal(err)
		}
		var selected []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				selected = append(selected, p.Labels[render.LabelComponent]+"@r"+p.Labels[render.LabelRevision])
			}
		}
		if len(selected) != 1 || selected[0] != "harness@r"+n {
			t.Errorf("revision %s: the harness Service selects %v, want revision %s's harness Pod", n, selected, n)
		}
	}

	if _, err := exec.Apply(ctx, codexRevision(t, ns, "codex/gpt-5-codex"), 1, 0); err != nil {
		t.Fatalf("revision 1: %v", err)
	}
	counter.mu.Lock()
	first := map[string]int{}
	for i, r := range counter.reqs {
		for _, obj := range []string{"/services/" + name, "/deployments/" + render.HarnessName("bench"), "/deployments/" + render.GatewayName("bench")} {
			if _, seen := first[obj]; !seen && strings.HasPrefix(r, "PATCH ") && strings.HasSuffix(r, obj) {
				first[obj] = i
			}
		}
	}
	counter.mu.Unlock()
	svcAt, ok := first["/services/"+name]
	if !ok || len(first) != 3 || svcAt > first["/deployments/"+render.HarnessName("bench")] || svcAt > first["/deployments/"+render.GatewayName("bench")] {
		t.Errorf("apply order %v: the harness Service must be applied before both workloads", first)
	}
	harnessSelects("1")

	if _, err := exec.Apply(ctx, codexRevision(t, ns, "codex/gpt-5.1-codex"), 2, 1); err != nil {
		t.Fatalf("revision 2: %v", err)
	}
	harnessSelects("2")

	// A switch to embedded retires it with the harness.
	if _, err := exec.Apply(ctx, testRevision(t, ns, nil), 3, 2); err != nil {
		t.Fatalf("revision 3 (embedded): %v", err)
	}
	if _, err := c.Clientset.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the switch to embedded the harness Service is still there (%v)", err)
	}

	// Back to dedicated Codex, then destroy: it goes with the agent.
	if _, err := exec.Apply(ctx, codexRevision(t, ns, "codex/gpt-5-codex"), 4, 3); err != nil {
		t.Fatalf("revision 4: %v", err)
	}
	harnessSelects("4")
	if err := exec.DeleteAgent(ctx, ns, "bench", false, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Clientset.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after destroy the harness Service is still there (%v)", err)
	}
}

// rule HM4: retiring and destroying an agent's harness Service never
// touches another agent's Service that bears its name (the Agent named
// "bench-harness" is served by a Service of that name).
func TestHM4_HarnessServiceCleanupSparesOtherAgents(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return testRevision(t, ns, nil) })
	other := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: render.HarnessServiceName("bench"), Labels: map[string]string{render.LabelAgent: "bench-harness", render.LabelManagedBy: render.ManagedBy}},
		Spec:       corev1.ServiceSpec{Selector: render.Selector("bench-harness", render.ComponentGateway), Ports: []corev1.ServicePort{{Name: "http", Port: render.GatewayPort}}},
	}
	if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Apply(ctx, testRevision(t, ns, map[string]string{"example.com/r": "2"}), 2, 1); err != nil {
		t.Fatalf("revision 2: %v", err)
	}
	if err := exec.DeleteAgent(ctx, ns, "bench", false, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Clientset.CoreV1().Services(ns).Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("agent bench's retire or destroy removed agent bench-harness's Service: %v", err)
	}
}
