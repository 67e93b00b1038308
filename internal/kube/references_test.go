package kube

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// TestReferences_KeptOnTheService: the deploy's references record is
// written on the agent's Service with the activation (the budget test
// holds that it costs no request), Read and List report it, a ModeSettings
// deploy (a compute changed outside revision identity) refreshes it
// without touching a workload, and a deploy without one leaves it.
func TestReferences_KeptOnTheService(t *testing.T) {
	c, _, compute, ctx := liveExecutor(t, 120*time.Second)
	ns := compute.Kubernetes().Namespace
	exec, counter := countedExecutor(t, c.Config)
	agent := executor.Agent{Name: "bench", Compute: &compute, Harness: admission.HarnessOpenClaw, ExecutionMode: admission.ModeEmbedded}
	annotation := func() string {
		t.Helper()
		s, err := c.Clientset.CoreV1().Services(ns).Get(ctx, render.ServiceName("bench"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Annotations[AnnotationReferences]
	}
	rev := testRevision(t, ns, nil)
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1, References: "record-1"}); err != nil {
		t.Fatal(err)
	}
	if got := annotation(); got != "record-1" {
		t.Fatalf("Service records %q, want record-1", got)
	}
	// The create activates with one request on the Service, the record in it.
	counter.mu.Lock()
	for _, r := range counter.reqs {
		if strings.Contains(r, "/services") && !strings.HasPrefix(r, "GET ") && !strings.HasPrefix(r, "POST ") {
			t.Errorf("the create wrote the Service again to record its references: %s", r)
		}
	}
	counter.mu.Unlock()
	if o, err := exec.Read(ctx, agent); err != nil || o.References != "record-1" {
		t.Fatalf("Read: %+v, %v", o, err)
	}
	if l, err := exec.List(ctx, inNamespace(ns)); err != nil || len(l) != 1 || l[0].References != "record-1" {
		t.Fatalf("List: %+v, %v", l, err)
	}

	before, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1, Serving: 1, Mode: executor.ModeSettings, References: "record-2"}); err != nil {
		t.Fatal(err)
	}
	if got := annotation(); got != "record-2" {
		t.Fatalf("after a ModeSettings deploy the Service records %q, want record-2", got)
	}
	after, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Fatalf("the ModeSettings deploy changed the gateway Deployment (generation %d → %d)", before.Generation, after.Generation)
	}
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1, Serving: 1, Mode: executor.ModeSettings}); err != nil {
		t.Fatal(err)
	}
	if got := annotation(); got != "record-2" {
		t.Fatalf("a deploy without a record left %q, want record-2 kept", got)
	}
}
