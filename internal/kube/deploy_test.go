package kube

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

func TestMain(m *testing.M) { os.Exit(testkube.Main(m)) }

// countingTransport counts the API requests a deploy makes.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func testRevision(t *testing.T, ns string, annotations map[string]string) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "bench"},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi", PodAnnotations: annotations},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}

// TestDeploy_Figures deploys one embedded revision to the real control plane
// and prints what the targets are measured on: API requests per deploy, and
// the time from the last Pod turning Ready (seen by an independent watch)
// to Deploy returning. It asserts only that the revision activates.
func TestDeploy_Figures(t *testing.T) {
	c := testkube.Shared(t)
	ns := c.TestNamespace(t)
	cfg := rest.CopyConfig(c.Config)
	counter := &countingTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// An independent observer of readiness.
	readyAt := make(chan time.Time, 1)
	w, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && testkube.PodReady(p) {
				readyAt <- time.Now()
				return
			}
		}
	}()

	exec := &Executor{Client: cs}
	rev := testRevision(t, ns, testkube.Behavior(testkube.BehaviorReadyAfter, 2*time.Second))
	res, err := exec.Deploy(ctx, rev, 1, 0)
	returned := time.Now()
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	objs, _ := render.Kubernetes(rev, 1)
	objects := len(objs.ServiceAccounts) + len(objs.ConfigMaps) + len(objs.Deployments) + 2 // + Service, audit Event
	t.Logf("API requests per deploy: %d for %d objects (target: at most objects + 2 = %d)", counter.n.Load(), objects, objects+2)
	select {
	case r := <-readyAt:
		t.Logf("activation noticed %s after the Pod turned Ready (target: within 100ms)", returned.Sub(r).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Log("the independent watch did not see the Pod turn Ready")
	}
	if res.ActivatedAt.IsZero() || res.Endpoint == "" {
		t.Errorf("result %+v", res)
	}
}

// TestDeploy_HeldCodeFailsAtOnce: an AUTHENTICATION_FAILED record on the
// container's log fails the deploy without waiting for the deadline (PR8).
func TestDeploy_HeldCodeFailsAtOnce(t *testing.T) {
	c := testkube.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
			if err == nil && len(pods.Items) > 0 {
				_ = c.SetPodLogs(ctx, ns, pods.Items[0].Name, "gateway", []string{
					`{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_TIMEOUT","final":true}`,
				})
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	start := time.Now()
	_, err := (&Executor{Client: c.Clientset}).Deploy(ctx, testRevision(t, ns, testkube.Behavior(testkube.BehaviorNeverReady, 0)), 1, 0)
	f, ok := err.(*Failure)
	if !ok || f.Code != "MODEL_PROBE_TIMEOUT" || f.Record == nil {
		t.Fatalf("deploy error = %v, want a MODEL_PROBE_TIMEOUT failure with its record", err)
	}
	t.Logf("held code surfaced %s after the deploy started", time.Since(start).Round(time.Millisecond))
	if time.Since(start) > 30*time.Second {
		t.Errorf("the held code took %s: the deploy waited for something else", time.Since(start))
	}
}
