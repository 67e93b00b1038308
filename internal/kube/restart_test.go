package kube

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// Issue 30: a restart of a sandboxed dedicated Codex agent, on the kwok
// control plane with the project's stand-in sandbox driver. The Sandbox's
// Pod, which the driver made, is deleted by name and UID and the driver
// makes it again; once it passes the gate (the Sandbox Ready again), the
// gateway's Deployment replaces its Pod. Both Pods are new; the Sandbox,
// the revision and its activation stay.
func TestRestart_SandboxedHarness(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	driver := c.StartSandboxDriver(t, kubeenv.SandboxDriverOptions{Namespaces: []string{ns}})
	k := comp.Kubernetes()
	k.SandboxDriver = &admission.SandboxDriver{Name: "openshell", Facets: []string{"networking", "filesystem", "process"}, RequiredProfile: "gpu-a",
		GatewayNamespace: driver.GatewayNamespace(), GatewayService: driver.GatewayService()}
	comp = admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: k}
	if _, err := c.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm"},
		StringData: map[string]string{"k": "sk-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	const name = "sandboxed"
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: name, Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       comp,
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	res, err := ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	agent := executor.Agent{Name: name, Compute: &comp, Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated}
	pods := func() map[string]corev1.Pod {
		t.Helper()
		l, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + name})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.Pod{}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				out[p.Labels[render.LabelComponent]] = p
			}
		}
		return out
	}
	before := pods()
	if len(before) != 2 {
		t.Fatalf("pods before the restart: %d, want the harness's and the gateway's", len(before))
	}
	out, err := ex.Restart(ctx, executor.Restart{Agent: agent})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	if out.Revision != 1 || !slices.Equal(out.Components, []string{render.ComponentHarness, render.ComponentGateway}) {
		t.Errorf("restart said %+v; want revision 1, the harness then the gateway", out)
	}
	after := pods()
	for _, comp := range []string{render.ComponentHarness, render.ComponentGateway} {
		if after[comp].UID == "" || after[comp].UID == before[comp].UID {
			t.Errorf("the %s Pod is %q after the restart, %q before it; want a new one", comp, after[comp].UID, before[comp].UID)
		}
	}
	if owner := metav1.GetControllerOf(ptr.To(after[render.ComponentHarness])); owner == nil || owner.Kind != "Sandbox" || owner.Name != render.HarnessSandboxName(name, 1) {
		t.Errorf("the new harness Pod is not the Sandbox's: %+v", owner)
	}
	o, err := ex.Read(ctx, agent)
	if err != nil || o.Revision != 1 || o.Drift != executor.DriftNone || !o.ActivatedAt.Equal(res.ActivatedAt) {
		t.Errorf("read after the restart: %+v, %v; want revision 1 activated at %s, no drift", o, err, res.ActivatedAt)
	}
}
