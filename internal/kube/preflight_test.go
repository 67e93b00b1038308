package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// admitOn admits an embedded revision of agent name on k.
func admitOn(t *testing.T, name string, k admission.KubernetesCompute) (*admission.Revision, admission.Compute) {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	c := admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: k}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: name},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       c,
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev, c
}

// preflightAndDeploy preflights revision 1 of rev on c, then deploys it,
// and fails unless both give code want (the preflight as a refusal, the
// deploy as its failure), the preflight's wording as a preflight's and
// saying what, and the preflight writing nothing.
func preflightAndDeploy(t *testing.T, c *kubeenv.Cluster, ex *Executor, ctx context.Context, rev *admission.Revision, comp admission.Compute, want executor.Code, says ...string) {
	t.Helper()
	ns := comp.Kubernetes().Namespace
	out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	if len(out.Refusals) == 0 {
		t.Fatalf("preflight refused nothing (warnings %+v); want %s", out.Warnings, want)
	}
	var f *executor.Failure
	if !errors.As(out.Refusals[0], &f) || f.Code != want || f.Op != executor.OpPreflight || f.Wrote {
		t.Fatalf("preflight refusal %#v; want a preflight's %s that wrote nothing", out.Refusals[0], want)
	}
	detail := f.Error() + "\n" + f.Detail(rev.ID())
	for _, s := range says {
		if !strings.Contains(detail, s) {
			t.Errorf("preflight refusal does not say %q:\n%s", s, detail)
		}
	}
	if !strings.Contains(detail, "Found by the plan's preflight") {
		t.Errorf("preflight refusal is not worded as a preflight's:\n%s", detail)
	}
	if left := leftOf(t, c, ctx, ns, rev.Agent); len(left) > 0 {
		t.Fatalf("the preflight wrote %v", left)
	}
	dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	_, err = ex.Deploy(dctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	var df *executor.Failure
	if !errors.As(err, &df) || df.Code != want {
		t.Fatalf("deploy: %v; want %s, as the preflight said", err, want)
	}
	t.Logf("preflight and apply: %s\npreflight: %s\napply:     %s", want, f.Error(), df.Error())
}

// leftOf lists what of agent is in ns.
func leftOf(t *testing.T, c *kubeenv.Cluster, ctx context.Context, ns, agent string) []string {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + agent}
	var out []string
	cms, err := c.Clientset.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		out = append(out, "ConfigMap/"+o.Name)
	}
	ss, _ := c.Clientset.CoreV1().Secrets(ns).List(ctx, sel)
	for _, o := range ss.Items {
		out = append(out, "Secret/"+o.Name)
	}
	ds, _ := c.Clientset.AppsV1().Deployments(ns).List(ctx, sel)
	for _, o := range ds.Items {
		out = append(out, "Deployment/"+o.Name)
	}
	svcs, _ := c.Clientset.CoreV1().Services(ns).List(ctx, sel)
	for _, o := range svcs.Items {
		out = append(out, "Service/"+o.Name)
	}
	pods, _ := c.Clientset.CoreV1().Pods(ns).List(ctx, sel)
	for _, o := range pods.Items {
		out = append(out, "Pod/"+o.Name)
	}
	nps, _ := c.Clientset.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	for _, o := range nps.Items {
		out = append(out, "NetworkPolicy/"+o.Name)
	}
	pvcs, _ := c.Clientset.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	for _, o := range pvcs.Items {
		out = append(out, "PersistentVolumeClaim/"+o.Name)
	}
	return out
}

// rule issue 31: a revision the cluster would run passes, and the
// preflight writes nothing; the reads that do not depend on the agent are
// made once per cluster and namespace, so a second agent costs only its
// own dry runs. The figures: requests of the first and of each further
// agent.
func TestPreflight_ClearWritesNothingAndSharesItsReads(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ex, counter := countedExecutor(t, c.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var perAgent []int64
	for i := range 5 {
		rev, comp := admitOn(t, fmt.Sprintf("clear-%d", i), admission.KubernetesCompute{Namespace: ns, CPUMillis: 100, MemoryLimit: "128Mi"})
		before := counter.n.Load()
		start := time.Now()
		out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
		if err != nil || len(out.Refusals) > 0 {
			t.Fatalf("preflight of %s: %v %v", rev.Agent, err, out.Refusals)
		}
		perAgent = append(perAgent, counter.n.Load()-before)
		t.Logf("agent %d: %d requests, %s, warnings %v", i, perAgent[i], time.Since(start).Round(time.Millisecond), out.Warnings)
		if left := leftOf(t, c, ctx, ns, rev.Agent); len(left) > 0 {
			t.Fatalf("the preflight wrote %v", left)
		}
	}
	if perAgent[1] >= perAgent[0] {
		t.Errorf("the second agent's preflight made %d requests, the first %d: the shared reads were made again", perAgent[1], perAgent[0])
	}
	for _, n := range perAgent[1:] {
		// Only its own dry runs: one create of each object it would write
		// (token Secret, ServiceAccount, ConfigMap, NetworkPolicy,
		// Deployment, Service), which also finds each name free, and of
		// its Pod.
		if n > 7 {
			t.Errorf("a further agent's preflight made %d requests; want only its own dry runs, one per object and Pod (%v)", n, perAgent)
		}
	}
}

// rule issue 31: a first deploy's preflight that meets the agent's own
// objects under its names (a create whose provider was killed after it
// activated) reads and judges them, dry-runs their update, and refuses
// nothing; it writes nothing.
func TestPreflight_CreateMeetsItsOwnObjects(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 2*time.Minute)
	ns := comp.Kubernetes().Namespace
	rev, comp := admitOn(t, "again", comp.Kubernetes())
	if _, err := ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"Secret/again-gateway-token", "ServiceAccount/again-gateway", "ConfigMap/again-r1", "NetworkPolicy/again-gateway", "Deployment/again-gateway", "Service/again"}
	before, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil || len(out.Refusals) > 0 {
		t.Fatalf("preflight: %v %v", err, out.Refusals)
	}
	after, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if before[k] == "" || after[k] != before[k] {
			t.Errorf("%s: resourceVersion %q before the preflight, %q after", k, before[k], after[k])
		}
	}
}

// rule issue 31: an agent no node could hold is refused at plan with the
// deploy's UNSCHEDULABLE, naming what it requests.
func TestPreflight_NoNodeCanHoldIt(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	k := comp.Kubernetes()
	k.CPUMillis, k.MemoryLimit = 4_000_000, "128Mi" // 4000 CPUs
	rev, comp := admitOn(t, "huge", k)
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.Unschedulable, "requests cpu 4k", "no schedulable node has that much allocatable")
}

// rule issue 31: a namespace's ResourceQuota that the agent's Pods
// exceed is the deploy's REPLICA_FAILURE, said at plan.
func TestPreflight_ResourceQuota(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	_, err := c.Clientset.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("500m"), corev1.ResourceLimitsMemory: resource.MustParse("4Gi"),
			corev1.ResourceRequestsCPU: resource.MustParse("500m"), corev1.ResourceRequestsMemory: resource.MustParse("4Gi")}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitQuotaCounted(t, c, ctx, ns, "small")
	rev, comp := admitOn(t, "quota", comp.Kubernetes())
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ReplicaFailure, "exceeded quota: small")
}

// waitQuotaCounted waits until the quota controller has written the
// quota's status (the API server admits against it only then).
func waitQuotaCounted(t *testing.T, c *kubeenv.Cluster, ctx context.Context, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := c.Clientset.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("quota %s/%s not counted within 30s: %v", ns, name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rule issue 31: a LimitRange whose maximum the agent's containers exceed.
func TestPreflight_LimitRange(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	_, err := c.Clientset.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "narrow"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, comp := admitOn(t, "limits", comp.Kubernetes())
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ReplicaFailure, "maximum cpu usage per Container is 500m")
}

// rule issue 31: a PriorityClass that does not exist.
func TestPreflight_PriorityClass(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	k := comp.Kubernetes()
	k.PriorityClassName = "occ-no-such-priority"
	rev, comp := admitOn(t, "priority", k)
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ReplicaFailure, "occ-no-such-priority", "Create the PriorityClass")
}

// rule issue 31: a state claim in a StorageClass that does not exist.
func TestPreflight_StorageClass(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	k := comp.Kubernetes()
	k.State = &admission.State{Size: "1Gi", StorageClass: "occ-no-such-class", AccessMode: "ReadWriteOnce"}
	rev, comp := admitOn(t, "storage", k)
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.StateClaim, `"occ-no-such-class" not found`)
}

// rule issue 31: the pinned runtime's Pods comply with Pod Security level
// restricted: in a namespace that enforces it, the preflight passes and
// the apply activates, exactly as the API server judges. A Pod the level
// refuses is judged by the same evaluator when the preflight cannot ask
// the API server (TestPodSecurity_JudgedByTheAdmissionsEvaluator).
func TestPreflight_PodSecurityRestrictedAdmitsTheRuntime(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	got, err := c.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := c.Clientset.CoreV1().Namespaces().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, comp := admitOn(t, "restricted", comp.Kubernetes())
	out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil || len(out.Refusals) > 0 {
		t.Fatalf("preflight in a restricted namespace: %v %v", err, out.Refusals)
	}
	if _, err := ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1}); err != nil {
		t.Fatalf("the preflight passed, the deploy failed: %v", err)
	}
}

// rule issue 31: an admission policy that refuses the agent's Pods (a
// ValidatingAdmissionPolicy, as a platform team writes one) answers the
// preflight's dry run as it answers the Deployment's ReplicaSet.
func TestPreflight_AdmissionPolicy(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	name := "occ-preflight-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `has(object.metadata.labels) && "team" in object.metadata.labels`,
				Message: "every Pod needs a team label"}}}}
	if _, err := c.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	if _, err := c.Clientset.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server enforces a new policy once its informers see it.
	rev, comp := admitOn(t, "policed", comp.Kubernetes())
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Refusals) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ReplicaFailure, "every Pod needs a team label")
}

// rule issue 31: the provider identity's missing permissions are the
// deploy's RESOURCE_CONFLICT, listed, at plan.
func TestPreflight_MissingPermissions(t *testing.T) {
	c, _, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	var rules []rbacv1.PolicyRule
	for _, r := range RequiredRules {
		if r.Resources[0] == "secrets" {
			continue // may not create the gateway's token
		}
		rules = append(rules, r)
	}
	id, err := c.NamespacedIdentity(ctx, ns, rules)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	rev, comp := admitOn(t, "unprivileged", comp.Kubernetes())
	preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ResourceConflict, "create secrets (core)")
}

// rule issue 31: an identity that may not create Pods (not even with
// dryRun) has the namespace's ResourceQuotas and LimitRanges judged by the
// preflight itself, with the same codes; a quota the agents of one plan
// would exceed together is a warning on the one that would not fit.
func TestPreflight_JudgedWithoutPodDryRun(t *testing.T) {
	c, _, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	_, err := c.Clientset.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "two"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2500m")}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitQuotaCounted(t, c, ctx, ns, "two")
	rules := append(append([]rbacv1.PolicyRule{}, RequiredRules...), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"list"}})
	id, err := c.NamespacedIdentity(ctx, ns, rules)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for i := range 3 {
		rev, comp := admitOn(t, fmt.Sprintf("share-%d", i), comp.Kubernetes()) // 1 CPU each
		out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
		if err != nil || len(out.Refusals) > 0 {
			t.Fatalf("agent %d: %v %v", i, err, out.Refusals)
		}
		for _, w := range out.Warnings {
			if strings.Contains(w.Summary, "ResourceQuota") {
				warned = append(warned, rev.Agent+": "+w.Detail)
			}
		}
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "share-2: ResourceQuota two allows requests.cpu=2500m") {
		t.Fatalf("quota warnings %q; want one, on share-2, the third agent of 1 CPU", warned)
	}
	k := comp.Kubernetes()
	k.CPUMillis = 3000
	rev, big := admitOn(t, "big", k)
	preflightAndDeploy(t, c, ex, ctx, rev, big, executor.ReplicaFailure, "exceeded quota: two", "requests.cpu")
}

// rule issue 31: without a Pod dry run, the preflight judges Pod Security
// with the Pod Security admission's own evaluator: the runtime's Pods pass
// level restricted; one with the host's network does not, in the
// evaluator's words.
func TestPodSecurity_JudgedByTheAdmissionsEvaluator(t *testing.T) {
	rev, comp := admitOn(t, "psa", admission.KubernetesCompute{Namespace: "psa", CPUMillis: 1000, MemoryLimit: "1Gi"})
	objs, err := render.Kubernetes(rev, 1, comp)
	if err != nil {
		t.Fatal(err)
	}
	pods := podsOf(objs)
	nv := &namespaceView{known: true, labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}
	if errs := podSecurity(nv, pods); len(errs) > 0 {
		t.Fatalf("the runtime's Pods refused by level restricted: %v", errs)
	}
	pods[0].spec.HostNetwork = true
	errs := podSecurity(nv, pods)
	var f *executor.Failure
	if len(errs) != 1 || !errors.As(errs[0], &f) || f.Code != executor.ReplicaFailure || !strings.Contains(f.Reason, `violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`) {
		t.Fatalf("host network under level restricted: %v", errs)
	}
	if errs := podSecurity(&namespaceView{known: true, labels: map[string]string{}}, pods); len(errs) > 0 {
		t.Fatalf("a namespace without a level refused: %v", errs)
	}
}

// rule issue 31: room on a node is what its allocatable leaves beside
// what its Pods request: none now is the deploy's UNSCHEDULABLE; room now
// that the agents planned before in the same plan would take is a
// warning; the agent's own Pods, which a new revision replaces, leave
// their room to it.
func TestFit_RoomNowPlannedAndOwn(t *testing.T) {
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := func(cpu string) []preflightPod {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
		return []preflightPod{{component: "gateway", requests: req, admitted: true}}
	}
	view := func(used string) *clusterView {
		return &clusterView{nodes: []corev1.Node{node}, nodesRead: true, podsRead: true,
			requested: map[string]corev1.ResourceList{"n1": {corev1.ResourceCPU: resource.MustParse(used)}}}
	}
	cv := view("1")
	if err, w := cv.fit("a", pod("1"), nil); err != nil || w != "" {
		t.Fatalf("1 CPU free, 1 asked: %v %q", err, w)
	}
	if err, w := cv.fit("b", pod("1"), nil); err != nil || !strings.Contains(w, "the agents planned before it in this plan would take that room first") {
		t.Fatalf("1 CPU free and planned for a: %v %q; want a warning", err, w)
	}
	err, _ := view("1500m").fit("c", pod("1"), nil)
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Unschedulable || !strings.Contains(f.Reason, "no schedulable node has that much free now") || !strings.Contains(f.Reason, "n1 with cpu 500m") {
		t.Fatalf("500m free, 1 asked: %v", err)
	}
	own := []podUse{{node: "n1", requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	if err, w := view("1500m").fit("c", pod("1"), own); err != nil || w != "" {
		t.Fatalf("500m free and 1 CPU the agent's own: %v %q", err, w)
	}
	cordoned := view("0")
	cordoned.nodes[0].Spec.Unschedulable = true
	if err, _ := cordoned.fit("d", pod("1"), nil); !errors.As(err, &f) || !strings.Contains(f.Reason, "no node can run it: n1: cordoned") {
		t.Fatalf("only a cordoned node: %v", err)
	}
}

// rule issue 31: a name the revision would write held by another owner's
// object (each kind the deploy writes, one at a time) is refused at plan
// with the deploy's own RESOURCE_CONFLICT naming that object; the
// neighbour's object is left as it was.
func TestPreflight_NameTaken(t *testing.T) {
	for _, key := range []string{"Secret/taken-gateway-token", "ServiceAccount/taken-gateway", "ConfigMap/taken-r1",
		"NetworkPolicy/taken-gateway", "Deployment/taken-gateway", "Service/taken"} {
		t.Run(key, func(t *testing.T) {
			c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
			ns := comp.Kubernetes().Namespace
			obj, ok := kubeenv.NeighbourObjects(ns, "taken")[key]
			if !ok {
				t.Fatalf("no neighbour object %s", key)
			}
			if _, err := kubeenv.Plant(ctx, c.Clientset, obj); err != nil {
				t.Fatal(err)
			}
			before, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, []string{key})
			if err != nil {
				t.Fatal(err)
			}
			rev, comp := admitOn(t, "taken", comp.Kubernetes())
			kind, name, _ := strings.Cut(key, "/")
			preflightAndDeploy(t, c, ex, ctx, rev, comp, executor.ResourceConflict, kind+" "+ns+"/"+name+` is not agent "taken"'s`)
			after, err := kubeenv.ResourceVersions(ctx, c.Clientset, ns, []string{key})
			if err != nil || after[key] != before[key] {
				t.Fatalf("the neighbour's %s: %v, %s then %s", key, err, before[key], after[key])
			}
		})
	}
}

// rule issue 31: a sandbox driver the cluster does not run is refused at
// plan with the deploy's own refusal (ND5's RESOURCE_CONFLICT), and the
// preflight writes nothing.
func TestPreflight_SandboxDriverNotInstalled(t *testing.T) {
	c, ex, comp, ctx := liveExecutor(t, 3*time.Minute)
	ns := comp.Kubernetes().Namespace
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	k := comp.Kubernetes()
	// The bundled driver's name, its gateway where none runs.
	k.SandboxDriver = &admission.SandboxDriver{Name: "openshell", Facets: []string{"networking", "filesystem", "process"}, RequiredProfile: "p",
		GatewayNamespace: ns, GatewayService: "occ-no-such-gateway"}
	comp = admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: k}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "sandboxed", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       comp,
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	code := func(err error) executor.Code {
		var f *executor.Failure
		var a *admission.Error
		var as admission.Errors
		switch {
		case errors.As(err, &f):
			return f.Code
		case errors.As(err, &a):
			return executor.Code(a.Class)
		case errors.As(err, &as) && len(as) > 0:
			return executor.Code(as[0].Class)
		}
		return ""
	}
	out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil || len(out.Refusals) == 0 || code(out.Refusals[0]) != executor.ResourceConflict || !strings.Contains(out.Refusals[0].Error(), "openshell") {
		t.Fatalf("preflight: %v, refusals %v; want RESOURCE_CONFLICT naming the driver", err, out.Refusals)
	}
	if left := leftOf(t, c, ctx, ns, rev.Agent); len(left) > 0 {
		t.Fatalf("the preflight wrote %v", left)
	}
	_, err = ex.Deploy(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if code(err) != executor.ResourceConflict {
		t.Fatalf("deploy: %v; want RESOURCE_CONFLICT, as the preflight said", err)
	}
	t.Logf("preflight: %v\napply:     %v", out.Refusals[0], err)
}

// rule issue 31: a pull Secret the compute names that does not exist is a
// warning at plan (the kubelet pulls without it; a private image then
// fails the apply with IMAGE_PULL_FAILED), not a refusal.
func TestPreflight_PullSecretMissing(t *testing.T) {
	_, ex, comp, ctx := liveExecutor(t, 2*time.Minute)
	k := comp.Kubernetes()
	k.ImagePullSecrets = []string{"occ-no-such-pull-secret"}
	rev, comp := admitOn(t, "pulls", k)
	out, err := ex.Preflight(ctx, executor.Deployment{Revision: rev, Compute: comp, N: 1})
	if err != nil || len(out.Refusals) > 0 {
		t.Fatalf("preflight: %v, refusals %v; want none", err, out.Refusals)
	}
	for _, w := range out.Warnings {
		if strings.Contains(w.Summary, `"occ-no-such-pull-secret" does not exist`) && strings.Contains(w.Detail, "IMAGE_PULL_FAILED") {
			return
		}
	}
	t.Fatalf("no warning names the missing pull Secret: %+v", out.Warnings)
}
