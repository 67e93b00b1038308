package kube

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The agent's NetworkPolicies on a real API server: written before the
// workloads on deploy, read back by Read (a deleted one is drift that a
// ModeSettings deployment writes back without a new revision), a component
// the revision no longer runs loses its policy at retirement, disabled
// deletes them, and destroy leaves none.
func TestNetworkPolicy_ExecutorLifecycle(t *testing.T) {
	c, exec, compute, ctx := liveExecutor(t, 120*time.Second)
	ns := compute.Kubernetes().Namespace
	names := func() []string {
		t.Helper()
		list, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	deploy := func(rev *admission.Revision, n, serving int64, only bool) {
		t.Helper()
		mode := executor.ModeActivate
		if only {
			mode = executor.ModeSettings
		}
		if _, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: compute, Mode: mode, N: n, Serving: serving}); err != nil {
			t.Fatalf("revision %d (network only %v): %v", n, only, err)
		}
	}
	read := func(harness, mode string) executor.Observed {
		t.Helper()
		o, err := exec.Read(ctx, executor.Agent{Name: "bench", Compute: &compute, Harness: harness, ExecutionMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	codex := codexRevision(t, ns, "codex/gpt-5-codex")
	deploy(codex, 1, 0, false)
	if got, want := names(), []string{render.GatewayName("bench"), render.HarnessName("bench")}; !slices.Equal(got, want) {
		t.Fatalf("after a dedicated Codex deploy: policies %v, want %v", got, want)
	}
	gw, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, hasRev := gw.Labels[render.LabelRevision]; hasRev || gw.Labels[render.LabelAgent] != "bench" || !wroteIt(gw) {
		t.Errorf("gateway policy labels %v: want the agent's, no revision, written by %s", gw.Labels, render.FieldManager)
	}
	if o := read(admission.HarnessCodex, admission.ModeDedicated); o.Drift != executor.DriftNone {
		t.Fatalf("read after deploy: %+v", o)
	}

	// A deleted policy is drift of its own; ModeSettings writes it back and
	// touches no workload.
	if err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Delete(ctx, render.HarnessName("bench"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o := read(admission.HarnessCodex, admission.ModeDedicated)
	if o.Drift != executor.DriftNetworkPolicy || !strings.Contains(o.DriftDetail, render.HarnessName("bench")) || o.Revision != 1 {
		t.Fatalf("read after deleting the harness policy: %+v", o)
	}
	before, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deploy(codex, 1, 1, true)
	after, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Errorf("a ModeSettings deployment changed the gateway Deployment (generation %d to %d)", before.Generation, after.Generation)
	}
	if o := read(admission.HarnessCodex, admission.ModeDedicated); o.Drift != executor.DriftNone {
		t.Fatalf("read after ModeSettings: %+v", o)
	}

	// A switch to embedded: the harness's policy retires with the harness.
	deploy(testRevision(t, ns, nil), 2, 1, false)
	if got, want := names(), []string{render.GatewayName("bench")}; !slices.Equal(got, want) {
		t.Errorf("after the switch to embedded: policies %v, want %v", got, want)
	}

	// Disabled: the agent's policies go, and nothing is drift.
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.NetworkPolicy.Disabled = true })
	deploy(testRevision(t, ns, nil), 2, 2, true)
	if got := names(); len(got) != 0 {
		t.Errorf("disabled: policies %v remain", got)
	}
	if o := read(admission.HarnessOpenClaw, admission.ModeEmbedded); o.Drift != executor.DriftNone {
		t.Errorf("read with policies disabled: %+v", o)
	}

	// Destroy removes them with the agent.
	compute = compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.NetworkPolicy.Disabled = false })
	deploy(testRevision(t, ns, nil), 2, 2, true)
	if len(names()) != 1 {
		t.Fatalf("enabled again: policies %v", names())
	}
	if err := exec.DeleteAgent(ctx, ns, "bench", false, false); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 0 {
		t.Errorf("after destroy: policies %v remain", got)
	}
	if _, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Get(ctx, render.GatewayName("bench"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("gateway policy after destroy: %v", err)
	}
}

// Destroy removes only its own agent's policies: agent "bench-gateway"'s
// are not agent "bench"'s (rule HM4).
func TestHM4_NetworkPolicyDestroySparesOtherAgents(t *testing.T) {
	c, ns, exec, ctx := firstRevision(t, func(ns string) *admission.Revision { return testRevision(t, ns, nil) })
	other := testRevision(t, ns, nil)
	other.Agent = "bench-gateway"
	for _, p := range render.NetworkPolicies(other, admission.NetworkPolicy{}, "") {
		if _, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Apply(ctx, p, applyOpts); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec.DeleteAgent(ctx, ns, "bench", false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Get(ctx, render.NetworkPolicyName("bench-gateway", render.ComponentGateway), metav1.GetOptions{}); err != nil {
		t.Errorf("destroying agent bench removed agent bench-gateway's policy: %v", err)
	}
	if _, err := c.Clientset.NetworkingV1().NetworkPolicies(ns).Get(ctx, render.NetworkPolicyName("bench", render.ComponentGateway), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("agent bench's policy after its destroy: %v", err)
	}
}
