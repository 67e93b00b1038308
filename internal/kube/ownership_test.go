package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// Issue 27: an object another application made under a name the agent
// derives is never written to. Each kind alone, in a namespace of its own:
// the create is RESOURCE_CONFLICT naming it, its resourceVersion is
// unchanged, and nothing of the agent is left (what the deploy had created
// before meeting it is deleted again), so the failure says nothing was
// written and Terraform keeps nothing in state.
func TestOwnership_ForeignObjectRefusesTheCreate(t *testing.T) {
	c := kubeenv.Shared(t)
	for _, key := range []string{"Secret/web-gateway-token", "ServiceAccount/web-gateway", "ConfigMap/web-r1", "NetworkPolicy/web-gateway", "Deployment/web-gateway", "Service/web"} {
		t.Run(key, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			ns := c.TestNamespace(t)
			// The provider runs as the documented Role: the refusal and
			// its clean-up need no verb beyond it.
			id, err := c.NamespacedIdentity(ctx, ns, RequiredRules)
			if err != nil {
				t.Fatal(err)
			}
			exec, err := New(id.Config)
			if err != nil {
				t.Fatal(err)
			}
			obj := kubeenv.NeighbourObjects(ns, "web")[key]
			if obj == nil {
				t.Fatalf("no neighbour object %s", key)
			}
			neighbour, err := c.NamespacedIdentity(ctx, ns, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kubeenv.Plant(ctx, neighbour.Clientset, obj); err != nil {
				t.Fatal(err)
			}
			before, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			rev := namedRevision(t, "web", ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, time.Second))
			_, err = exec.Apply(ctx, rev, 1, 0)
			var f *executor.Failure
			if !errors.As(err, &f) || f.Code != executor.ResourceConflict {
				t.Fatalf("create beside the neighbour's %s: %v, want RESOURCE_CONFLICT", key, err)
			}
			kind, name, _ := strings.Cut(key, "/")
			if want := fmt.Sprintf("%s %s/%s is not agent \"web\"'s", kind, ns, name); !strings.Contains(f.Summary, want) {
				t.Errorf("summary %q, want it to name the object: %q", f.Summary, want)
			}
			if !strings.Contains(f.Next, "Rename this agent") {
				t.Errorf("next %q, want the way out", f.Next)
			}
			if f.Wrote {
				t.Errorf("the failure says something was left written: %s", f.Error())
			}
			after, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			if after[key] != before[key] {
				t.Errorf("the neighbour's %s changed: %s, then %s", key, before[key], after[key])
			}
			left, err := kubeenv.AgentLeftovers(ctx, c.Clientset, ns, "web")
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("the refused create left %v", left)
			}
		})
	}
}

// Issue 27: a namespace holding, from another identity, an object of every
// kind and name the provider derives for agent "web" (and a StatefulSet,
// a Job and an Ingress): agent web's create is refused at the first of
// them, before any workload; a neighbour agent's create, update and
// destroy in that namespace leave every one of them unchanged.
func TestOwnership_HostileNeighbourUntouched(t *testing.T) {
	c, exec, _, ctx := liveExecutor(t, 120*time.Second)
	ns := c.TestNamespace(t)
	neighbour, err := c.NamespacedIdentity(ctx, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for key, obj := range kubeenv.NeighbourObjects(ns, "web") {
		if _, err := kubeenv.Plant(ctx, neighbour.Clientset, obj); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	before, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
	if err != nil {
		t.Fatal(err)
	}

	ready := kubeenv.Behavior(kubeenv.BehaviorReadyAfter, time.Second)
	_, err = exec.Apply(ctx, namedRevision(t, "web", ns, ready), 1, 0)
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.ResourceConflict || !strings.Contains(f.Summary, "Secret "+ns+"/web-gateway-token") || f.Wrote {
		t.Fatalf("create of web: %v, want RESOURCE_CONFLICT naming the token Secret first, nothing written", err)
	}

	// Agent "api" lives beside them: create, an update, destroy.
	if _, err := exec.Apply(ctx, namedRevision(t, "api", ns, ready), 1, 0); err != nil {
		t.Fatalf("create of api: %v", err)
	}
	upd := namedRevision(t, "api", ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 2*time.Second))
	if _, err := exec.Apply(ctx, upd, 2, 1); err != nil {
		t.Fatalf("update of api: %v", err)
	}
	if err := exec.DeleteAgent(ctx, ns, "api", false, false); err != nil {
		t.Fatalf("destroy of api: %v", err)
	}
	after, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
	if err != nil {
		t.Fatalf("a neighbour's object is gone: %v", err)
	}
	for _, k := range keys {
		if after[k] != before[k] {
			t.Errorf("the neighbour's %s changed: resourceVersion %s, then %s", k, before[k], after[k])
		}
	}
	for _, agent := range []string{"web", "api"} {
		if left, err := kubeenv.AgentLeftovers(ctx, c.Clientset, ns, agent); err != nil || len(left) > 0 {
			t.Errorf("agent %s left %v (%v)", agent, left, err)
		}
	}
	// The compute that created the namespace is destroyed: the namespace
	// is kept, and the warning says why, naming what is in it.
	compute := admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns}}
	out, err := exec.Release(ctx, executor.Release{Compute: compute, Created: true})
	if err != nil || len(out.Kept) != 1 || out.Kept[0].Summary != "Namespace "+ns+" was kept" {
		t.Fatalf("release of the compute: %+v, %v; want the namespace kept with one warning", out, err)
	}
	for _, k := range keys {
		if !strings.Contains(out.Kept[0].Detail, k) {
			t.Errorf("the warning does not name the neighbour's %s: %s", k, out.Kept[0].Detail)
		}
	}
	if _, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace is gone: %v", err)
	}
}

// Issue 27: each activation records on the agent's Service the objects
// kept per agent; an update applies those without asking whose they are
// (no Create, no read: no request more than an unguarded apply), and the
// record follows a switch of topology.
func TestOwnership_ServiceRecordsTheAgentsObjects(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	cs, counter := countedClient(t, c.Config, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	exec := &Executor{Client: cs}
	recorded := func(want string) {
		t.Helper()
		svc, err := c.Clientset.CoreV1().Services(ns).Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := svc.Annotations[AnnotationAgentObjects]; got != want {
			t.Errorf("recorded %q, want %q", got, want)
		}
	}
	ready := kubeenv.Behavior(kubeenv.BehaviorReadyAfter, time.Second)
	if _, err := exec.Apply(ctx, testRevision(t, ns, ready), 1, 0); err != nil {
		t.Fatal(err)
	}
	recorded("Deployment/bench-gateway,NetworkPolicy/bench-gateway,Secret/bench-gateway-token,ServiceAccount/bench-gateway")

	counter.mu.Lock()
	counter.reqs = nil
	counter.mu.Unlock()
	if _, err := exec.Apply(ctx, testRevision(t, ns, kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 2*time.Second)), 2, 1); err != nil {
		t.Fatal(err)
	}
	counter.mu.Lock()
	for _, r := range counter.reqs {
		for _, per := range []string{"/secrets", "/serviceaccounts", "/networkpolicies"} {
			// A create, or a read of one object (a list by the agent's
			// label is retirement's, not a question of ownership).
			if strings.HasPrefix(r, "POST ") && strings.HasSuffix(r, per) || strings.HasPrefix(r, "GET ") && strings.Contains(r, per+"/") {
				t.Errorf("the update asked about an object the Service records: %s", r)
			}
		}
	}
	counter.mu.Unlock()

	// A switch to dedicated Codex records the harness's objects too.
	if _, err := exec.Apply(ctx, codexRevision(t, ns, "codex/gpt-5-codex"), 3, 2); err != nil {
		t.Fatalf("revision 3 (dedicated): %v", err)
	}
	want := []string{"Deployment/bench-gateway", "Deployment/bench-harness", "NetworkPolicy/bench-gateway", "NetworkPolicy/bench-harness",
		"Secret/" + render.AppServerTokenSecret("bench"), "Secret/bench-gateway-token", "Service/" + render.HarnessServiceName("bench"),
		"ServiceAccount/bench-gateway", "ServiceAccount/bench-harness"}
	slices.Sort(want)
	recorded(strings.Join(want, ","))
}

// Issue 27: what someone else keeps in a namespace the provider created
// keeps the namespace when its compute is destroyed, whatever the kind:
// workloads of every built-in kind, Ingresses, NetworkPolicies, Roles
// (a controller's own objects, a Deployment's ReplicaSet, are not
// counted). An identity that may not list a kind cannot tell the
// namespace is empty: the kind is named instead.
func TestOwnership_OccupantsSeeEveryKind(t *testing.T) {
	c, exec, _, ctx := liveExecutor(t, 60*time.Second)
	ns := c.TestNamespace(t)
	objs := kubeenv.NeighbourObjects(ns, "web")
	for _, k := range []string{"StatefulSet/web-gateway", "Job/web-gateway", "Ingress/web-gateway", "NetworkPolicy/web-gateway", "ServiceAccount/web-gateway"} {
		if _, err := kubeenv.Plant(ctx, c.Clientset, objs[k]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Clientset.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The provider's own binding in a namespace it created goes with it;
	// a binding of that name someone else made does not.
	own := render.ManagedBy
	for i, meta := range []metav1.ObjectMeta{
		{Name: NamespaceRoleBinding, Labels: map[string]string{render.LabelManagedBy: own}, Annotations: map[string]string{render.AnnotationCompute: "prod"}},
		{Name: NamespaceRoleBinding + "-copy", Labels: map[string]string{render.LabelManagedBy: own}},
	} {
		if _, err := c.Clientset.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("binding %d: %v", i, err)
		}
	}
	left, err := exec.Occupants(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Ingress/web-gateway", "Job/web-gateway", "NetworkPolicy/web-gateway", "Role/reader", "StatefulSet/web-gateway", "ServiceAccount/web-gateway",
		"RoleBinding/" + NamespaceRoleBinding + "-copy (from another configuration)"}
	for _, w := range want {
		if !slices.Contains(left, w) {
			t.Errorf("occupants %v lack %s", left, w)
		}
	}
	if slices.Contains(left, "RoleBinding/"+NamespaceRoleBinding+" (from another configuration)") || slices.Contains(left, "ServiceAccount/default") {
		t.Errorf("occupants %v count the provider's own binding or the default ServiceAccount", left)
	}

	// Without list on statefulsets: the namespace cannot be judged empty.
	var rules []rbacv1.PolicyRule
	for _, r := range append(append([]rbacv1.PolicyRule{}, RequiredRules...), OccupantRules...) {
		r = *r.DeepCopy()
		r.Resources = slices.DeleteFunc(r.Resources, func(s string) bool { return s == "statefulsets" })
		if len(r.Resources) > 0 {
			rules = append(rules, r)
		}
	}
	id, err := c.ClusterIdentity(ctx, c.TestNamespace(t), rules)
	if err != nil {
		t.Fatal(err)
	}
	limited, err := New(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	empty := c.TestNamespace(t)
	left, err = limited.Occupants(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || !strings.Contains(left[0], "statefulsets (the provider may not list them") || !strings.Contains(left[0], "statefulsets.apps") {
		t.Errorf("occupants of an empty namespace, unlisted statefulsets: %v, want that kind named", left)
	}
}

// Issue 27: destroying an imported agent (its compute, and so whether a
// sandbox driver runs its harness, not known) removes its Sandboxes too;
// a neighbour's Sandbox, and another agent's, are left as they were.
// Before, an import's destroy never looked at Sandboxes.
func TestOwnership_ImportedAgentsSandboxesGo(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tmpl := corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("h").WithImage("registry.invalid/h:1")))
	agentLabels := func(agent string) map[string]string {
		return map[string]string{render.LabelAgent: agent, render.LabelManagedBy: render.ManagedBy}
	}
	sandboxes := c.Dynamic.Resource(sandboxapi.GVR).Namespace(ns)
	for name, l := range map[string]map[string]string{
		render.HarnessSandboxName("imp", 1):  agentLabels("imp"),
		render.HarnessSandboxName("imp2", 1): agentLabels("imp2"),
		render.HarnessSandboxName("imp", 9):  kubeenv.NeighbourLabels, // bears the name, not the labels
	} {
		obj, err := (&render.Sandbox{Name: name, Labels: l, Template: tmpl}).Object(ns)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sandboxes.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exec := &Executor{Client: c.Clientset, Dynamic: c.Dynamic}
	if err := exec.Delete(ctx, executor.Agent{Name: "imp", ImportID: ns + "/imp"}); err != nil {
		t.Fatal(err)
	}
	list, err := sandboxes.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, sb := range list.Items {
		left = append(left, sb.GetName())
	}
	slices.Sort(left)
	if want := []string{render.HarnessSandboxName("imp", 9), render.HarnessSandboxName("imp2", 1)}; !slices.Equal(left, want) {
		t.Errorf("Sandboxes left %v, want %v", left, want)
	}
}
