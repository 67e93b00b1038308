package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// The agent's Service exposure on a real API server, outside revision
// identity: a LoadBalancer apply waits for the controller's address and
// reports it as the endpoint; changed annotations are written by a
// ModeSettings deployment without touching a workload, removing only the
// keys the compute set; an edit outside Terraform is drift; back to
// ClusterIP clears the node ports; and a load balancer that never gets an
// address fails with DEADLINE_EXCEEDED, the revision still serving.
func TestExposure_ExecutorLifecycle(t *testing.T) {
	c, exec, compute, ctx := liveExecutor(t, 180*time.Second)
	ns := compute.Kubernetes().Namespace
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) {
		k.Exposure = admission.Exposure{Type: admission.ServiceLoadBalancer, Annotations: map[string]string{"example.com/internal": "true", "example.com/tier": "a"}, SourceRanges: []string{"10.0.0.0/8"}}
	})
	svc := func() *corev1.Service {
		t.Helper()
		s, err := c.Clientset.CoreV1().Services(ns).Get(ctx, render.ServiceName("bench"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	read := func() executor.Observed {
		t.Helper()
		o, err := exec.Read(ctx, executor.Agent{Name: "bench", Compute: &compute, Harness: admission.HarnessOpenClaw, ExecutionMode: admission.ModeEmbedded})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	lbCtx, stopLB := context.WithCancel(ctx)
	kubeenv.FakeLoadBalancer(lbCtx, c.Clientset, ns, "192.0.2.10")

	rev := testRevision(t, ns, nil)
	res, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://192.0.2.10:18789"; res.Endpoint != want {
		t.Errorf("endpoint %q, want the load balancer's %q", res.Endpoint, want)
	}
	s := svc()
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Annotations["example.com/internal"] != "true" || len(s.Spec.LoadBalancerSourceRanges) != 1 ||
		s.Annotations[AnnotationActivatedRevision] != "1" || s.Annotations[render.AnnotationExposureKeys] != "example.com/internal,example.com/tier" {
		t.Fatalf("Service after the first deploy: type %s, annotations %v, ranges %v", s.Spec.Type, s.Annotations, s.Spec.LoadBalancerSourceRanges)
	}
	if o := read(); o.Drift != executor.DriftNone || o.Endpoint != res.Endpoint {
		t.Fatalf("read after deploy: %+v", o)
	}

	// Another controller's annotation stays; a key the compute drops goes;
	// no workload is touched.
	s.Annotations["cloud.example/lb-id"] = "lb-1"
	if _, err := c.Clientset.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) {
		k.Exposure.Annotations = map[string]string{"example.com/internal": "false"}
	})
	if o := read(); o.Drift != executor.DriftExposure {
		t.Errorf("read with changed annotations in the compute: %+v, want exposure drift", o)
	}
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1, Serving: 1, Mode: executor.ModeSettings}); err != nil {
		t.Fatal(err)
	}
	s = svc()
	if s.Annotations["example.com/internal"] != "false" || s.Annotations["cloud.example/lb-id"] != "lb-1" || s.Annotations["example.com/tier"] != "" {
		t.Errorf("annotations after the change: %v", s.Annotations)
	}
	after, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Errorf("an exposure change touched the gateway Deployment (generation %d to %d)", before.Generation, after.Generation)
	}

	// An edit outside Terraform (the type) is drift, written back.
	s.Spec.Type = corev1.ServiceTypeClusterIP
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	s.Spec.ExternalTrafficPolicy, s.Spec.AllocateLoadBalancerNodePorts, s.Spec.LoadBalancerSourceRanges = "", nil, nil
	if _, err := c.Clientset.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if o := read(); o.Drift != executor.DriftExposure || !strings.Contains(o.DriftDetail, "outside Terraform") {
		t.Errorf("read after an edit of the type: %+v", o)
	}
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 1, Serving: 1, Mode: executor.ModeSettings}); err != nil {
		t.Fatal(err)
	}
	if o := read(); o.Drift != executor.DriftNone || o.Endpoint != "http://192.0.2.10:18789" {
		t.Errorf("read after writing the exposure back: %+v", o)
	}

	// A new revision keeps the exposure and the node port.
	port := svc().Spec.Ports[0].NodePort
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: testRevision(t, ns, map[string]string{"example.com/r": "2"}), Compute: compute, N: 2, Serving: 1}); err != nil {
		t.Fatal(err)
	}
	if s := svc(); s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Spec.Ports[0].NodePort != port || s.Annotations[AnnotationActivatedRevision] != "2" {
		t.Errorf("after revision 2: type %s, node port %d (was %d), annotations %v", s.Spec.Type, s.Spec.Ports[0].NodePort, port, s.Annotations)
	}

	// Back to ClusterIP: the node ports and the compute's annotations go.
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.Exposure = admission.Exposure{} })
	res, err = exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 2, Serving: 2, Mode: executor.ModeSettings})
	if err != nil {
		t.Fatal(err)
	}
	s = svc()
	if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].NodePort != 0 || s.Annotations["example.com/internal"] != "" || s.Annotations[render.AnnotationExposureKeys] != "" {
		t.Errorf("back to ClusterIP: type %s, node port %d, annotations %v", s.Spec.Type, s.Spec.Ports[0].NodePort, s.Annotations)
	}
	if want := "http://bench." + ns + ".svc:18789"; res.Endpoint != want {
		t.Errorf("ClusterIP endpoint %q, want %q", res.Endpoint, want)
	}

	// No controller: a LoadBalancer that gets no address fails at the
	// deadline with DEADLINE_EXCEEDED; the revision still serves.
	stopLB()
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) {
		k.Exposure = admission.Exposure{Type: admission.ServiceLoadBalancer}
	})
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	_, err = exec.Deploy(short, executor.Deployment{Revision: rev, Compute: compute, N: 2, Serving: 2, Mode: executor.ModeSettings})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Deadline || !strings.Contains(f.Next, "wait_for_load_balancer") {
		t.Fatalf("a load balancer without a controller: %v, want DEADLINE_EXCEEDED naming wait_for_load_balancer", err)
	}
	if s := svc(); s.Annotations[AnnotationActivatedRevision] != "2" || s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("after the failed wait: %v, type %s", s.Annotations, s.Spec.Type)
	}
	// With NoWait the apply returns at once, on the in-cluster URL.
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.Exposure.NoWait = true })
	if res, err = exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, N: 2, Serving: 2, Mode: executor.ModeSettings}); err != nil || !strings.HasSuffix(res.Endpoint, ".svc:18789") {
		t.Errorf("NoWait: %v, endpoint %q", err, res.Endpoint)
	}
	if err := exec.DeleteAgent(ctx, ns, "bench", false, false); err != nil {
		t.Fatal(err)
	}
}

// A Service written by someone else between the read and the exposure's
// update (a conflict, injected by writing it under the executor's feet):
// the update is made again on the Service as it now is while it is still
// the agent's, keeping the other writer's change; once it is no longer
// the agent's (its labels taken away), the exposure refuses it with
// RESOURCE_CONFLICT and writes nothing.
func TestExposure_ConflictTriedAgainWhileTheAgents(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, time.Minute)
	ns := comp.Kubernetes().Namespace
	svcs := c.Clientset.CoreV1().Services(ns)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "conflicted", Labels: map[string]string{render.LabelAgent: "conflicted", render.LabelManagedBy: render.ManagedBy}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "gateway", Port: 18789}}, Selector: map[string]string{render.LabelAgent: "conflicted"}}}
	stale, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*corev1.Service)) {
		cur, err := svcs.Get(ctx, "conflicted", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f(cur)
		if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "someone-else"}); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(s *corev1.Service) { s.Labels["team"] = "web" })
	x := admission.Exposure{Annotations: map[string]string{"example.com/exposed": "yes"}}
	got, err := ex.op(nil).expose(ctx, stale, "conflicted", x)
	if err != nil {
		t.Fatalf("expose over a conflict: %v", err)
	}
	if got.Annotations["example.com/exposed"] != "yes" || got.Labels["team"] != "web" {
		t.Fatalf("after the conflict the Service has annotations %v and labels %v; want both writers' changes", got.Annotations, got.Labels)
	}
	edit(func(s *corev1.Service) { delete(s.Labels, render.LabelManagedBy) })
	before, _ := svcs.Get(ctx, "conflicted", metav1.GetOptions{})
	_, err = ex.op(nil).expose(ctx, got, "conflicted", admission.Exposure{Annotations: map[string]string{"example.com/exposed": "again"}})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.ResourceConflict {
		t.Fatalf("expose of a Service no longer the agent's: %v; want RESOURCE_CONFLICT", err)
	}
	if after, _ := svcs.Get(ctx, "conflicted", metav1.GetOptions{}); after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the refused exposure wrote the Service (resourceVersion %s, then %s)", before.ResourceVersion, after.ResourceVersion)
	}
}
