package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// List finds exactly the agents the provider deployed in one namespace,
// once each however many revisions they had, in name order, with one API
// request, and reads each as Read does: not an agent of a neighbouring
// namespace that bears the same name, nor a Service made by hand with a
// similar name and without the provider's labels (or with the agent label
// but not managed-by). An empty namespace, and one that does not exist,
// hold no agents: the API server answers an empty list for both, so List
// does too, without an error.
func TestList_NamesTheNamespacesAgents(t *testing.T) {
	c := kubeenv.Shared(t)
	ns, neighbour, empty := c.TestNamespace(t), c.TestNamespace(t), c.TestNamespace(t)
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	alpha2 := namedRevision(t, "alpha", ns, map[string]string{"example.com/r": "2"})
	for _, d := range []struct {
		rev         *admission.Revision
		n, serving  int64
		description string
	}{
		{namedRevision(t, "alpha", ns, nil), 1, 0, "alpha revision 1"},
		{alpha2, 2, 1, "alpha revision 2"},
		{namedRevision(t, "beta", ns, nil), 1, 0, "beta"},
		{namedRevision(t, "alpha", neighbour, nil), 1, 0, "alpha in the neighbouring namespace"},
	} {
		if _, err := exec.Apply(ctx, d.rev, d.n, d.serving); err != nil {
			t.Fatalf("deploy %s: %v", d.description, err)
		}
	}
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "alphas"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gamma", Labels: map[string]string{render.LabelAgent: "gamma"}}},
	} {
		svc.Spec = corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: render.GatewayPort}}}
		if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cs, counter := countedClient(t, c.Config, nil)
	lister := &Executor{Client: cs}
	got, err := lister.List(ctx, inNamespace(ns))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("List made %d API requests, want 1: %v", n, counter.reqs)
	}
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "beta" {
		t.Fatalf("List(%s) = %+v, want alpha and beta", ns, got)
	}
	for _, l := range got {
		o, err := exec.Observe(ctx, ns, l.Name, render.TopologyOf(alpha2.Harness, alpha2.ExecutionMode, false))
		if err != nil {
			t.Fatal(err)
		}
		want := executor.Listed{Name: l.Name, ID: ns + "/" + l.Name, Observed: o}
		if l != want || l.Drift != executor.DriftNone || l.Revision < 1 || l.RevisionID == "" || l.ActivatedAt.IsZero() || l.Endpoint == "" {
			t.Errorf("listed %+v, want %+v as Read reads it", l, want)
		}
	}
	if got[0].Revision != 2 || got[0].RevisionID != alpha2.ID() || got[1].Revision != 1 {
		t.Errorf("listed revisions alpha %d (%s), beta %d; want alpha 2 (%s), beta 1", got[0].Revision, got[0].RevisionID, got[1].Revision, alpha2.ID())
	}

	// A Service edited to select another revision lists the agent drifted,
	// in Read's words.
	patch := []byte(`{"spec":{"selector":{"` + render.LabelRevision + `":"9"}}}`)
	if _, err := c.Clientset.CoreV1().Services(ns).Patch(ctx, "beta", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := lister.List(ctx, inNamespace(ns)); err != nil || len(got) != 2 || got[1].Drift == executor.DriftNone || got[1].DriftDetail != `the Service selects revision "9", not the activated revision 1` {
		t.Errorf("after editing beta's Service: %+v, %v", got, err)
	}

	for _, where := range []string{empty, "occ-list-missing"} {
		got, err := lister.List(ctx, inNamespace(where))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("List(%s) = %+v, %v; want an empty list", where, got, err)
		}
	}
	before := counter.n.Load()
	_, err = lister.List(ctx, inNamespace("Not_A_Namespace"))
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.InvalidRequest || f.Op != executor.OpList {
		t.Errorf("List of a malformed namespace: %v, want INVALID_REQUEST", err)
	}
	if counter.n.Load() != before {
		t.Error("List sent a request for a malformed namespace")
	}
}

// inNamespace is the compute a listing of namespace ns reads.
func inNamespace(ns string) admission.Compute {
	return admission.Compute{Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns}}
}
