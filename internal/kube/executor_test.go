package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// What a request did to the cluster decides Wrote, marked by the
// transport itself: accepted writes and writes of unknown outcome count;
// refusals, reads and access reviews do not.
func TestMarkWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/forbidden"):
			w.WriteHeader(http.StatusForbidden)
		case strings.HasSuffix(r.URL.Path, "/conflict"):
			w.WriteHeader(http.StatusConflict)
		case strings.HasSuffix(r.URL.Path, "/broken"):
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	rt := MarkWrites(http.DefaultTransport)
	for _, tc := range []struct {
		method, path string
		wrote        bool
	}{
		{http.MethodPost, "/api/v1/namespaces/a/configmaps", true},
		{http.MethodPatch, "/apis/apps/v1/namespaces/a/deployments/x", true},
		{http.MethodDelete, "/api/v1/namespaces/a/services/x", true},
		{http.MethodPost, "/api/v1/namespaces/a/secrets/forbidden", false},
		{http.MethodPost, "/api/v1/namespaces/a/secrets/conflict", false},
		{http.MethodPost, "/api/v1/namespaces/a/secrets/broken", true},
		{http.MethodGet, "/api/v1/namespaces/a/services/x", false},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", false},
	} {
		var w executor.Writes
		req, _ := http.NewRequestWithContext(executor.WithWrites(context.Background(), &w), tc.method, srv.URL+tc.path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if w.Any() != tc.wrote {
			t.Errorf("%s %s: wrote = %v, want %v", tc.method, tc.path, w.Any(), tc.wrote)
		}
	}
	// No answer at all: the write may have happened.
	var w executor.Writes
	req, _ := http.NewRequestWithContext(executor.WithWrites(context.Background(), &w), http.MethodPost, "http://127.0.0.1:1/api/v1/x", nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	if !w.Any() {
		t.Error("a write without an answer is not counted as written")
	}
}

func TestParseImportID(t *testing.T) {
	e := &Executor{}
	for id, want := range map[string]struct {
		name    string
		ok, bad bool
	}{
		"occ-acme/support": {"support", true, false},
		"support":          {"", false, false},
		"Occ/support":      {"", true, true},
		"occ-acme/1st":     {"", true, true},
	} {
		name, ok, err := e.ParseImportID(id)
		if name != want.name || ok != want.ok || (err != nil) != want.bad {
			t.Errorf("ParseImportID(%q) = %q %v %v, want %+v", id, name, ok, err, want)
		}
	}
	if got := AgentID(admission.Compute{Settings: admission.KubernetesCompute{Namespace: "occ-acme"}}, "support"); got != "occ-acme/support" {
		t.Errorf("AgentID = %q", got)
	}
}

// rule PR10, AC4: a first dedicated deploy creates the Agent's Service
// before its gate, claiming nothing; the activation time is taken when the
// gate passes and recorded on the Service and in the audit Event.
func TestPR10_FirstDedicatedDeployRecordsItsActivationTime(t *testing.T) {
	began := time.Now().UTC().Truncate(time.Second)
	c, ns, _, ctx := firstRevision(t, func(ns string) *admission.Revision { return codexRevision(t, ns, "codex/gpt-5-codex") })
	svc, err := c.Clientset.CoreV1().Services(ns).Get(ctx, "bench", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, svc.Annotations[AnnotationActivatedAt])
	if err != nil || at.Before(began) || svc.Annotations[AnnotationActivatedRevision] != "1" {
		t.Fatalf("the Service records activation %q of revision %q, want one after %s", svc.Annotations[AnnotationActivatedAt], svc.Annotations[AnnotationActivatedRevision], began)
	}
	events, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil || len(events.Items) != 1 || strings.Contains(events.Items[0].Message, "0001-01-01") {
		t.Fatalf("audit events %v (%v), want one with the activation time", events, err)
	}
}

// A deleted Service is drift, not an agent at revision 0: the next apply
// deploys the next revision number.
func TestObserve_DeletedServiceIsDrift(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return testRevision(t, ns, nil) })
	top := render.TopologyOf(admission.HarnessOpenClaw, admission.ModeEmbedded, false)
	if o, err := exec.Observe(ctx, ns, "bench", top); err != nil || o.Drift != executor.DriftNone || o.Revision != 1 {
		t.Fatalf("before: %+v, %v", o, err)
	}
	if err := c.Clientset.CoreV1().Services(ns).Delete(ctx, "bench", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := exec.Observe(ctx, ns, "bench", top)
	if err != nil || !o.Exists || o.Drift != executor.DriftWorkload || !strings.Contains(o.DriftDetail, "Service bench was deleted") {
		t.Fatalf("after deleting the Service: %+v, %v", o, err)
	}
}

// liveExecutor is an executor on the shared test control plane, with a
// namespace of the test's own, a compute of it and a context that ends
// after timeout (or with the test).
func liveExecutor(t *testing.T, timeout time.Duration) (*kubeenv.Cluster, *Executor, admission.Compute, context.Context) {
	t.Helper()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return c, exec, admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi"}}, ctx
}
