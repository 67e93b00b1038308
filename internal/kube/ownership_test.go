package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// neighbourManager is the field manager of the neighbour's writes.
const neighbourManager = "neighbour-app"

var neighbourLabels = map[string]string{"app.kubernetes.io/name": "neighbour"}

// neighbourObjects are another application's objects, each bearing a
// name agent derives in namespace ns: the gateway token Secret, the
// ServiceAccount, revision 1's ConfigMap, the NetworkPolicy, the
// Deployment and the Service; and a StatefulSet, a Job and an Ingress
// named like the gateway. Key: "Kind/name".
func neighbourObjects(ns, agent string) map[string]runtime.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: neighbourLabels}
	}
	gw := render.GatewayName(agent)
	podSpec := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: neighbourLabels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/neighbour:1"}}}}
	job := podSpec.DeepCopy()
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	sel := &metav1.LabelSelector{MatchLabels: neighbourLabels}
	return map[string]runtime.Object{
		"Secret/" + render.GatewayTokenSecret(agent):  &corev1.Secret{ObjectMeta: meta(render.GatewayTokenSecret(agent)), StringData: map[string]string{render.GatewayTokenKey: "a token the neighbour knows"}},
		"ServiceAccount/" + gw:                        &corev1.ServiceAccount{ObjectMeta: meta(gw)},
		"ConfigMap/" + render.ConfigMapName(agent, 1): &corev1.ConfigMap{ObjectMeta: meta(render.ConfigMapName(agent, 1)), Data: map[string]string{"k": "v"}},
		"NetworkPolicy/" + gw: &networkingv1.NetworkPolicy{ObjectMeta: meta(gw), Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		"Deployment/" + gw:                     &appsv1.Deployment{ObjectMeta: meta(gw), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: podSpec}},
		"Service/" + render.ServiceName(agent): &corev1.Service{ObjectMeta: meta(render.ServiceName(agent)), Spec: corev1.ServiceSpec{Selector: neighbourLabels, Ports: []corev1.ServicePort{{Port: 80}}}},
		"StatefulSet/" + gw:                    &appsv1.StatefulSet{ObjectMeta: meta(gw), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: podSpec}},
		"Job/" + gw:                            &batchv1.Job{ObjectMeta: meta(gw), Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: *job}},
		"Ingress/" + gw: &networkingv1.Ingress{ObjectMeta: meta(gw), Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: render.ServiceName(agent), Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
	}
}

// plant creates obj as the neighbour and returns its resourceVersion.
func plant(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) (string, error) {
	o := metav1.CreateOptions{FieldManager: neighbourManager}
	var m metav1.Object
	var err error
	switch v := obj.(type) {
	case *corev1.Secret:
		m, err = cs.CoreV1().Secrets(v.Namespace).Create(ctx, v, o)
	case *corev1.ServiceAccount:
		m, err = cs.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, o)
	case *corev1.ConfigMap:
		m, err = cs.CoreV1().ConfigMaps(v.Namespace).Create(ctx, v, o)
	case *corev1.Service:
		m, err = cs.CoreV1().Services(v.Namespace).Create(ctx, v, o)
	case *networkingv1.NetworkPolicy:
		m, err = cs.NetworkingV1().NetworkPolicies(v.Namespace).Create(ctx, v, o)
	case *networkingv1.Ingress:
		m, err = cs.NetworkingV1().Ingresses(v.Namespace).Create(ctx, v, o)
	case *appsv1.Deployment:
		m, err = cs.AppsV1().Deployments(v.Namespace).Create(ctx, v, o)
	case *appsv1.StatefulSet:
		m, err = cs.AppsV1().StatefulSets(v.Namespace).Create(ctx, v, o)
	case *batchv1.Job:
		m, err = cs.BatchV1().Jobs(v.Namespace).Create(ctx, v, o)
	default:
		return "", fmt.Errorf("plant: %T", obj)
	}
	if err != nil {
		return "", fmt.Errorf("plant %T: %w", obj, err)
	}
	return m.GetResourceVersion(), nil
}

// resourceVersions reads the planted objects' versions now. For a kind
// without a controller it is the resourceVersion; a Deployment's,
// StatefulSet's or Job's status is written by its controller whenever it
// likes, so theirs is what only a writer of the object changes: its
// generation (every spec change), labels, and the writers of anything but
// its status other than its controller (which annotates a Deployment).
func resourceVersions(ctx context.Context, cs kubernetes.Interface, ns string, keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		kind, name, _ := strings.Cut(k, "/")
		var m metav1.Object
		var err error
		g := metav1.GetOptions{}
		switch kind {
		case "Secret":
			m, err = cs.CoreV1().Secrets(ns).Get(ctx, name, g)
		case "ServiceAccount":
			m, err = cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, g)
		case "ConfigMap":
			m, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, name, g)
		case "Service":
			m, err = cs.CoreV1().Services(ns).Get(ctx, name, g)
		case "NetworkPolicy":
			m, err = cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, g)
		case "Ingress":
			m, err = cs.NetworkingV1().Ingresses(ns).Get(ctx, name, g)
		case "Deployment":
			m, err = cs.AppsV1().Deployments(ns).Get(ctx, name, g)
		case "StatefulSet":
			m, err = cs.AppsV1().StatefulSets(ns).Get(ctx, name, g)
		case "Job":
			m, err = cs.BatchV1().Jobs(ns).Get(ctx, name, g)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = m.GetResourceVersion()
		switch kind {
		case "Deployment", "StatefulSet", "Job":
			var writers []string
			for _, f := range m.GetManagedFields() {
				if f.Subresource != "status" && f.Manager != "kube-controller-manager" {
					writers = append(writers, f.Manager+":"+string(f.Operation))
				}
			}
			out[k] = fmt.Sprintf("generation %d, labels %v, written by %v", m.GetGeneration(), m.GetLabels(), writers)
		}
	}
	return out, nil
}

// agentLeftovers lists what of agent is in ns, by the provider's labels.
func agentLeftovers(ctx context.Context, cs kubernetes.Interface, ns, agent string) ([]string, error) {
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + agent}
	var out []string
	add := func(kind string, n int, err error, name func(int) string) error {
		for i := 0; i < n && err == nil; i++ {
			out = append(out, kind+"/"+name(i))
		}
		return err
	}
	s, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	if err = add("Secret", len(s.Items), err, func(i int) string { return s.Items[i].Name }); err != nil {
		return nil, err
	}
	sa, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, sel)
	if err = add("ServiceAccount", len(sa.Items), err, func(i int) string { return sa.Items[i].Name }); err != nil {
		return nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err = add("ConfigMap", len(cm.Items), err, func(i int) string { return cm.Items[i].Name }); err != nil {
		return nil, err
	}
	np, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err = add("NetworkPolicy", len(np.Items), err, func(i int) string { return np.Items[i].Name }); err != nil {
		return nil, err
	}
	d, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	if err = add("Deployment", len(d.Items), err, func(i int) string { return d.Items[i].Name }); err != nil {
		return nil, err
	}
	svc, err := cs.CoreV1().Services(ns).List(ctx, sel)
	if err = add("Service", len(svc.Items), err, func(i int) string { return svc.Items[i].Name }); err != nil {
		return nil, err
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	if err = add("PersistentVolumeClaim", len(pvc.Items), err, func(i int) string { return pvc.Items[i].Name }); err != nil {
		return nil, err
	}
	return out, nil
}

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
			obj := neighbourObjects(ns, "web")[key]
			if obj == nil {
				t.Fatalf("no neighbour object %s", key)
			}
			neighbour, err := c.NamespacedIdentity(ctx, ns, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plant(ctx, neighbour.Clientset, obj); err != nil {
				t.Fatal(err)
			}
			before, err := resourceVersions(ctx, c.Clientset, ns, []string{key})
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
			after, err := resourceVersions(ctx, c.Clientset, ns, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			if after[key] != before[key] {
				t.Errorf("the neighbour's %s changed: %s, then %s", key, before[key], after[key])
			}
			left, err := agentLeftovers(ctx, c.Clientset, ns, "web")
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
	for key, obj := range neighbourObjects(ns, "web") {
		if _, err := plant(ctx, neighbour.Clientset, obj); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	before, err := resourceVersions(ctx, c.Clientset, ns, keys)
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
	after, err := resourceVersions(ctx, c.Clientset, ns, keys)
	if err != nil {
		t.Fatalf("a neighbour's object is gone: %v", err)
	}
	for _, k := range keys {
		if after[k] != before[k] {
			t.Errorf("the neighbour's %s changed: resourceVersion %s, then %s", k, before[k], after[k])
		}
	}
	for _, agent := range []string{"web", "api"} {
		if left, err := agentLeftovers(ctx, c.Clientset, ns, agent); err != nil || len(left) > 0 {
			t.Errorf("agent %s left %v (%v)", agent, left, err)
		}
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
	objs := neighbourObjects(ns, "web")
	for _, k := range []string{"StatefulSet/web-gateway", "Job/web-gateway", "Ingress/web-gateway", "NetworkPolicy/web-gateway"} {
		if _, err := plant(ctx, c.Clientset, objs[k]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Clientset.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	left, err := exec.Occupants(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Ingress/web-gateway", "Job/web-gateway", "NetworkPolicy/web-gateway", "Role/reader", "StatefulSet/web-gateway"}
	for _, w := range want {
		if !slices.Contains(left, w) {
			t.Errorf("occupants %v lack %s", left, w)
		}
	}

	// Without list on statefulsets: the namespace cannot be judged empty.
	var rules []rbacv1.PolicyRule
	for _, r := range append(append([]rbacv1.PolicyRule{}, RequiredRules...), NamespaceLifecycleRules...) {
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
		render.HarnessSandboxName("imp", 9):  neighbourLabels, // bears the name, not the labels
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
