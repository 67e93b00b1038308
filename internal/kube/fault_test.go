package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// Fault: the API server restarts while apply waits for the revision's
// startup probe. Pass: the apply returns activated (a create that would be
// tainted otherwise), with exactly one audit Event. Its own cluster: the
// restart must not disturb the other tests' shared one.
func TestFault_APIServerRestartWhileTheGateWaits(t *testing.T) {
	c, ns, ctx := ownCluster(t)
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		// Once the revision's Pod exists (the gate waits on it), take the
		// API server away for 3 s.
		sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"}
		for ctx.Err() == nil {
			if pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, sel); err == nil && len(pods.Items) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		restarted <- c.RestartAPIServer(ctx, 3*time.Second)
	}()
	res, err := exec.Apply(ctx, testRevision(t, ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 15*time.Second)), 1, 0)
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restarting the API server: %v", rerr)
	}
	if err != nil {
		t.Fatalf("apply across an API server restart: %v", err)
	}
	if res.ActivatedAt.IsZero() {
		t.Fatal("activated without an activation time")
	}
	events, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events.Items); n != 1 || events.Items[0].Reason != "RevisionActivated" {
		t.Fatalf("%d audit events, want one RevisionActivated", n)
	}
}

// lostAfter is a transport whose connection is lost for good once a
// request matching cut has succeeded: what a provider killed (or a network
// gone) right after that request leaves behind.
type lostAfter struct {
	next http.RoundTripper
	cut  func(*http.Request) bool
	lost atomic.Bool
}

func (l *lostAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.lost.Load() {
		return nil, errors.New("connection lost (injected)")
	}
	resp, err := l.next.RoundTrip(req)
	if err == nil && resp.StatusCode < 300 && l.cut(req) {
		l.lost.Store(true)
	}
	return resp, err
}

// Fault: the connection is lost right after the activation (the
// Service's guarded patch succeeded), before the audit record and the
// retirement, on a switch from dedicated Codex to embedded. Pass: Read
// reports the activation unretired (not clean: the earlier harness still
// holds the credential, AU6); a finish deploys nothing, keeps the
// activation time, removes every object of revision 1 and writes one
// audit record; Read is then clean. A finish whose revision no longer
// serves is refused as stale and writes nothing. rule AC4
func TestFault_StoppedBetweenActivationAndRetirement(t *testing.T) {
	c, ns, _, ctx := firstRevision(t, func(ns string) *admission.Revision { return codexRevision(t, ns, "codex/gpt-5-codex") })
	cfg := rest.CopyConfig(c.Config)
	lost := &lostAfter{cut: func(r *http.Request) bool {
		return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/services/"+render.ServiceName("bench"))
	}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { lost.next = rt; return lost }
	dying, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rev2 := testRevision(t, ns, nil)
	res, _ := dying.Apply(ctx, rev2, 2, 1) // retirement and audit fail silently: the next apply finishes them
	if !lost.lost.Load() {
		t.Fatal("the activation never happened: the fault was not injected")
	}
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	top := render.TopologyOf(rev2.Harness, rev2.ExecutionMode, false)
	obs, err := exec.Observe(ctx, ns, "bench", top)
	if err != nil {
		t.Fatal(err)
	}
	if obs.Drift != executor.DriftUnretired || obs.Revision != 2 || obs.RevisionID != rev2.ID() || !strings.Contains(obs.DriftDetail, "-r1 remains") {
		t.Fatalf("after the lost connection: %+v, want revision 2 unretired naming a ConfigMap of revision 1", obs)
	}
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench," + render.LabelRevision + "=1"}
	if deps, _ := c.Clientset.AppsV1().Deployments(ns).List(ctx, sel); len(deps.Items) == 0 {
		t.Fatal("the earlier harness is gone already: the fault left nothing to finish")
	}

	compute := admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns}}
	// A finish of a revision that no longer serves: stale, nothing written.
	_, err = exec.Deploy(ctx, executor.Deployment{Revision: testRevision(t, ns, map[string]string{"example.com/r": "other"}), Compute: compute, N: 2, Serving: 2, Mode: executor.ModeFinish})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Stale || executor.Wrote(err) {
		t.Fatalf("finish of another revision: %v, want %s with nothing written", err, executor.Stale)
	}

	time.Sleep(1100 * time.Millisecond) // a new activation would get a later second
	got, err := exec.Deploy(ctx, executor.Deployment{Revision: rev2, Compute: compute, N: 2, Serving: 2, Mode: executor.ModeFinish})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if !res.ActivatedAt.IsZero() && !got.ActivatedAt.Equal(res.ActivatedAt) {
		t.Errorf("the finish moved the activation time from %s to %s", res.ActivatedAt, got.ActivatedAt)
	}
	for kind, n := range map[string]int{
		"Deployments": len(must(c.Clientset.AppsV1().Deployments(ns).List(ctx, sel)).Items),
		"ConfigMaps":  len(must(c.Clientset.CoreV1().ConfigMaps(ns).List(ctx, sel)).Items),
		"Services":    len(must(c.Clientset.CoreV1().Services(ns).List(ctx, sel)).Items),
	} {
		if n != 0 {
			t.Errorf("after the finish: %d %s of revision 1, want none", n, kind)
		}
	}
	evs := must(c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelRevision + "=2"}))
	if len(evs.Items) != 1 || evs.Items[0].Reason != "RevisionActivated" {
		t.Fatalf("%d audit records for revision 2, want exactly 1", len(evs.Items))
	}
	if obs, err := exec.Observe(ctx, ns, "bench", top); err != nil || obs.Drift != executor.DriftNone {
		t.Fatalf("after the finish: %+v (%v), want clean", obs, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// watchLog records the resourceVersion every Pod watch was opened from.
type watchLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	rvs  []string
}

func (w *watchLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if q := req.URL.Query(); q.Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/pods") {
		w.mu.Lock()
		w.rvs = append(w.rvs, q.Get("resourceVersion"))
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

// opened is how many Pod watches were opened.
func (w *watchLog) opened() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.rvs)
}

// restartedFromScratch reports whether a watch resumed from a
// resourceVersion was later opened again from none: the restart after 410.
func (w *watchLog) restartedFromScratch() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	resumed := false
	for _, rv := range w.rvs {
		switch {
		case rv != "":
			resumed = true
		case resumed:
			return true
		}
	}
	return false
}

// Fault: etcd is compacted past the gate's watch, and the API server
// restarts, while apply waits for the startup probe: the watch resumed
// from its last resourceVersion gets 410 Gone. Pass: the gate starts over
// from the current objects (shown by the watch requests), the apply
// returns activated, exactly one audit Event. Its own cluster.
func TestFault_EtcdCompactedWhileTheGateWaits(t *testing.T) {
	c, ns, ctx := ownCluster(t)
	cfg := rest.CopyConfig(c.Config)
	watches := &watchLog{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { watches.next = rt; return watches }
	exec, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	injected := make(chan error, 1)
	go func() {
		injected <- func() error {
			// The gate's watch must hold a resourceVersion from before the
			// churn and see no Pod event after it: wait until the watch is
			// open and the Pod has gone through kwok's start (Running, its
			// readiness 15 s away), then a second for the watch's events.
			// Struck earlier, the scheduling and start updates move the
			// Pod past the compaction and no 410 reaches the watch.
			sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"}
			for ctx.Err() == nil {
				if pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, sel); err == nil && len(pods.Items) > 0 &&
					pods.Items[0].Status.Phase == corev1.PodRunning && watches.opened() > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Second)
			// Move etcd's revision past what the watch has seen, then
			// compact everything before it away.
			for i := range 5 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%d", i)}}
				if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if _, err := c.CompactEtcd(ctx); err != nil {
				return err
			}
			return c.RestartAPIServer(ctx, 2*time.Second)
		}()
	}()
	res, err := exec.Apply(ctx, testRevision(t, ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 15*time.Second)), 1, 0)
	if ierr := <-injected; ierr != nil {
		t.Fatalf("injecting the compaction: %v", ierr)
	}
	if err != nil {
		t.Fatalf("apply across a compaction: %v", err)
	}
	if res.ActivatedAt.IsZero() {
		t.Fatal("activated without an activation time")
	}
	if !watches.restartedFromScratch() {
		t.Fatalf("the Pod watch was never restarted after a 410 (resourceVersions %q): the fault did not reach it", watches.rvs)
	}
	events, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events.Items); n != 1 || events.Items[0].Reason != "RevisionActivated" {
		t.Fatalf("%d audit events, want one RevisionActivated", n)
	}
}

// ownCluster starts a control plane for one fault test (a restart or a
// compaction must not disturb the shared one), a namespace in it, and a
// context that ends with the test.
func ownCluster(t *testing.T) (*kubeenv.Cluster, string, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	c, err := kubeenv.Start(ctx, kubeenv.Options{})
	if err != nil {
		kubeenv.SkipOrFail(t, err)
	}
	t.Cleanup(c.Stop)
	return c, c.TestNamespace(t), ctx
}
