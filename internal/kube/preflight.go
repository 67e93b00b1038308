package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// PreflightRules are what a plan's preflight asks in a compute's namespace
// beside RequiredRules: a dry-run create of each Pod the revision would
// run (the API server's own admission answers: quota, LimitRange, Pod
// Security, PriorityClass, webhooks, and the placement its admission
// adds; a dry run stores nothing, and the provider's Deployments can
// create those Pods anyway), and, for an identity without it, the
// ResourceQuotas and LimitRanges to judge them by. ProviderClusterRole
// holds them; an identity without them is told which checks the
// preflight skipped.
var PreflightRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"list"}},
}

// PreflightClusterRules are what the preflight reads across the cluster
// (the optional ClusterRole PreflightClusterRole): the nodes and the Pods
// bound to them (what is already requested of each node), and the
// StorageClasses and PriorityClasses a revision may name. Listing Pods
// cluster-wide reads every Pod's spec, other tenants' included: a
// platform team grants it knowingly, and without it the preflight checks
// only that some node could hold the agent when empty.
var PreflightClusterRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"list"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list"}},
	{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"list"}},
}

// PreflightClusterRole names the optional ClusterRole of
// PreflightClusterRules (examples/kubernetes-role/preflight-role.yaml).
const PreflightClusterRole = "occ-provider-preflight"

// preflightCache holds what the preflights of one executor (one provider
// process: one plan) read once per cluster and once per namespace, and
// what the agents preflighted so far would take of it.
type preflightCache struct {
	mu         sync.Mutex
	cluster    *clusterView
	namespaces map[string]*namespaceView
}

func newPreflightCache() *preflightCache {
	return &preflightCache{namespaces: map[string]*namespaceView{}}
}

// clusterView is the cluster as the preflight reads it once.
type clusterView struct {
	once sync.Once
	err  error
	// skipped names the checks the identity may not make.
	skipped []string
	warned  bool
	// nodes are read when nodesRead; requested (per node, what its Pods
	// request) and agentPods (what each agent's Pods request, per node:
	// freed when a new revision replaces them) when podsRead.
	nodes               []corev1.Node
	nodesRead, podsRead bool
	requested           map[string]corev1.ResourceList
	agentPods           map[string][]podUse
	storageClasses      map[string]bool
	defaultClass        string
	classesRead         bool
	priorityClasses     map[string]bool
	prioritiesRead      bool
	mu                  sync.Mutex
	planned             map[string]corev1.ResourceList // per node, by the agents preflighted in this process
}

type podUse struct {
	node     string
	requests corev1.ResourceList
}

// namespaceView is a namespace as the preflight reads it once.
type namespaceView struct {
	once sync.Once
	err  error
	// exists is false when the namespace is not there yet (the apply
	// creates it); known is false when the identity may not read it.
	exists, known bool
	labels        map[string]string
	// permissions is the missing permissions (nil: none missing).
	permissions *MissingPermissions
	skipped     []string
	warned      bool
	// dryRunPods: the identity may create Pods here (with dryRun=All).
	dryRunPods  bool
	quotas      []corev1.ResourceQuota
	limits      []corev1.LimitRange
	mu          sync.Mutex
	planned     corev1.ResourceList // quota usage by the agents preflighted in this process
	pullSecrets map[string]bool
}

func (e *Executor) preflightCache() *preflightCache {
	if e.preflight == nil {
		return newPreflightCache() // an executor built by hand: nothing shared
	}
	return e.preflight
}

// Preflight reads, and writes nothing, what a deploy of d would meet
// (executor.Executor): the namespace and the identity's permissions in it,
// a server-side dry run of every object the revision writes, the
// namespace's Pod Security level, ResourceQuotas and LimitRanges for its
// Pods, room on a schedulable node, the StorageClass, PriorityClass and
// pull Secrets it names, and its sandbox driver. What does not depend on
// the agent is read once per cluster and namespace per executor.
func (e *Executor) Preflight(ctx context.Context, d executor.Deployment) (executor.Preflighted, error) {
	var out executor.Preflighted
	rev, c, n := d.Revision, d.Compute, d.N
	refuse := func(err error) { out.Refuse(err, rev.Agent, n) }
	objs, err := renderKubernetes(rev, n, c)
	if err != nil {
		refuse(err)
		return out, nil
	}
	op := e.op(d.Log).reads() // reads and dry runs only: their own, higher limit
	op.log.Print("preflight", map[string]any{"work.operation": "preflight", "revision": n})
	cache := e.preflightCache()
	cv, err := op.clusterView(ctx, cache)
	if err != nil {
		return out, preflightUnavailable(rev.Agent, n, err)
	}
	nv, err := op.namespaceView(ctx, cache, c)
	if err != nil {
		return out, preflightUnavailable(rev.Agent, n, err)
	}
	op.warnSkipped(cache, cv, nv, &out)
	if nv.permissions != nil {
		refuse(prepareFailure(c, nv.permissions))
		return out, nil
	}
	if c.Kubernetes().SandboxDriver != nil && rev.ExecutionMode == admission.ModeDedicated {
		st, err := op.DriverState(ctx, c.Kubernetes().SandboxDriver)
		switch {
		case err != nil:
			return out, preflightUnavailable(rev.Agent, n, err)
		case !st.Installed:
			if err := admission.CheckSandbox(rev.ExecutionMode, st.Observed(c)); err != nil {
				refuse(err)
			}
		case !st.Ready:
			out.Warn(fmt.Sprintf("Agent %q: the sandbox driver %q is not ready", rev.Agent, c.Kubernetes().SandboxDriver.Name),
				st.Detail+". The apply waits for it until its timeout, then fails with UNAVAILABLE.")
		}
	}
	pods := podsOf(objs)
	var free map[string]bool // ServiceAccounts found not to exist
	if nv.exists {
		var taken error
		var errs []error
		if d.Serving == 0 {
			taken, errs, free = op.dryRunCreate(ctx, rev, objs)
		} else if taken = op.takenName(ctx, rev, objs); taken == nil {
			errs = op.dryRun(ctx, objs)
		}
		if taken != nil {
			refuse(taken) // a name is another's: the deploy stops there, so nothing else is judged
		}
		for _, err := range errs {
			refuse(err)
		}
	}
	own := cv.ownPods(objs.Namespace, rev.Agent, d.Serving > 0)
	if nv.exists && nv.dryRunPods {
		// The API server admits each Pod as its Deployment would create
		// it, and says where admission places it.
		for i := range pods {
			if err := op.dryRunPod(ctx, &pods[i], free); err != nil {
				refuse(err)
			}
		}
	} else {
		for _, err := range podSecurity(nv, pods) {
			refuse(err)
		}
		for _, err := range limitRanges(nv, pods) {
			refuse(err)
		}
		refusal, warning := nv.quota(rev.Agent, pods, own)
		if refusal != nil {
			refuse(refusal)
		} else if warning != "" {
			out.Warn(fmt.Sprintf("Agent %q may exceed namespace %s's ResourceQuota", rev.Agent, objs.Namespace), warning)
		}
	}
	refusal, warning := cv.fit(rev.Agent, pods, own)
	if refusal != nil {
		refuse(refusal)
	} else if warning != "" {
		out.Warn(fmt.Sprintf("Agent %q may not find room on a node", rev.Agent), warning)
	}
	if pc := c.Kubernetes().PriorityClassName; pc != "" && !(nv.exists && nv.dryRunPods) && cv.prioritiesRead && !cv.priorityClasses[pc] {
		msg := fmt.Sprintf("no PriorityClass with name %s was found", pc)
		refuse(&Failure{Code: executor.ReplicaFailure, Phase: "pod creation", Reason: "the API server refuses the agent's Pods: " + msg, Next: replicaFailureNext("PriorityClass")})
	}
	if err := op.checkClaim(ctx, cv, nv, objs, rev.Agent, d.Serving); err != nil {
		refuse(err)
	}
	for _, name := range c.Kubernetes().ImagePullSecrets {
		if nv.exists && !op.pullSecretExists(ctx, nv, objs.Namespace, name) {
			out.Warn(fmt.Sprintf("Agent %q: the image pull Secret %q does not exist in namespace %s", rev.Agent, name, objs.Namespace),
				"The kubelet pulls without it; a private image then fails the apply with IMAGE_PULL_FAILED. Create the Secret (kubectl create secret docker-registry) or remove it from the compute's image_pull_secrets.")
		}
	}
	return out, nil
}

// preflightUnavailable is a target the preflight could not read.
func preflightUnavailable(agent string, n int64, err error) error {
	return executor.Normalize(err, executor.Exit{Op: executor.OpPreflight, Agent: agent, Revision: n, Code: executor.Unavailable,
		Summary: fmt.Sprintf("the cluster did not answer agent %q's preflight", agent), Finish: whereContainer})
}

// clusterView reads the cluster once per cache: an access review for each
// read (so that an identity without them is told what was skipped), then
// the reads allowed.
func (e *Executor) clusterView(ctx context.Context, cache *preflightCache) (*clusterView, error) {
	cache.mu.Lock()
	if cache.cluster == nil {
		cache.cluster = &clusterView{}
	}
	cv := cache.cluster
	cache.mu.Unlock()
	cv.once.Do(func() { cv.err = e.readCluster(ctx, cv) })
	if cv.err != nil {
		// A failed read is tried again by the next agent's preflight.
		cache.mu.Lock()
		if cache.cluster == cv {
			cache.cluster = nil
		}
		cache.mu.Unlock()
	}
	return cv, cv.err
}

func (e *Executor) readCluster(ctx context.Context, cv *clusterView) error {
	may := func(group, res string) (bool, error) {
		return e.mayPreflight(ctx, "", group, res, "list")
	}
	skip := func(what string) { cv.skipped = append(cv.skipped, what) }
	ok, err := may("", "nodes")
	if err != nil {
		return err
	}
	if ok {
		list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		cv.nodes, cv.nodesRead = list.Items, true
	} else {
		skip("room on the nodes (list nodes)")
	}
	if ok, err = may("", "pods"); err != nil {
		return err
	}
	if ok && cv.nodesRead {
		cv.requested, cv.agentPods = map[string]corev1.ResourceList{}, map[string][]podUse{}
		opts := metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed", Limit: 500}
		for {
			list, err := e.Client.CoreV1().Pods("").List(ctx, opts)
			if err != nil {
				return fmt.Errorf("list pods: %w", err)
			}
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.NodeName == "" {
					continue
				}
				req := podRequests(&p.Spec)
				add(cv.requested, p.Spec.NodeName, req)
				if a := p.Labels[render.LabelAgent]; a != "" && p.Labels[render.LabelManagedBy] == render.ManagedBy {
					k := p.Namespace + "/" + a
					cv.agentPods[k] = append(cv.agentPods[k], podUse{node: p.Spec.NodeName, requests: req})
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
		cv.podsRead = true
	} else if cv.nodesRead {
		skip("what the nodes' Pods already request (list pods, cluster-wide): only whether an empty node could hold the agent was checked")
	}
	if ok, err = may("storage.k8s.io", "storageclasses"); err != nil {
		return err
	}
	if ok {
		list, err := e.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list storage classes: %w", err)
		}
		cv.storageClasses, cv.classesRead = map[string]bool{}, true
		for _, sc := range list.Items {
			cv.storageClasses[sc.Name] = true
			if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" && cv.defaultClass == "" {
				cv.defaultClass = sc.Name
			}
		}
	} else {
		skip("the StorageClasses (list storageclasses)")
	}
	if ok, err = may("scheduling.k8s.io", "priorityclasses"); err != nil {
		return err
	}
	if ok {
		list, err := e.Client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list priority classes: %w", err)
		}
		cv.priorityClasses, cv.prioritiesRead = map[string]bool{}, true
		for _, pc := range list.Items {
			cv.priorityClasses[pc.Name] = true
		}
	} else {
		skip("the PriorityClasses (list priorityclasses)")
	}
	return nil
}

// mayPreflight asks whether the identity may make one of the preflight's
// reads: in namespace ns one of PreflightRules, cluster-wide (ns empty)
// one of PreflightClusterRules. A read the rules do not list is refused
// here, so that the documented roles, made from the same rules, always
// grant everything the preflight asks.
func (e *Executor) mayPreflight(ctx context.Context, ns, group, resource, verb string) (bool, error) {
	rules := PreflightClusterRules
	if ns != "" {
		rules = PreflightRules
	}
	if !rulesGrant(rules, group, resource, verb) {
		return false, fmt.Errorf("the preflight asks %s %s (%q) outside its documented rules", verb, resource, group)
	}
	return e.allowed(ctx, authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource})
}

// rulesGrant says whether rules grant verb on group/resource.
func rulesGrant(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// namespaceView reads a compute's namespace once per cache.
func (e *Executor) namespaceView(ctx context.Context, cache *preflightCache, c admission.Compute) (*namespaceView, error) {
	ns := c.Kubernetes().Namespace
	key := ns
	if c.Kubernetes().SandboxDriver != nil {
		key += "+sandbox"
	}
	cache.mu.Lock()
	nv := cache.namespaces[key]
	if nv == nil {
		nv = &namespaceView{}
		cache.namespaces[key] = nv
	}
	cache.mu.Unlock()
	nv.once.Do(func() { nv.err = e.readNamespace(ctx, nv, c) })
	if nv.err != nil {
		cache.mu.Lock()
		if cache.namespaces[key] == nv {
			delete(cache.namespaces, key)
		}
		cache.mu.Unlock()
	}
	return nv, nv.err
}

func (e *Executor) readNamespace(ctx context.Context, nv *namespaceView, c admission.Compute) error {
	ns := c.Kubernetes().Namespace
	got, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		nv.exists, nv.known, nv.labels = true, true, got.Labels
	case apierrors.IsForbidden(err):
		// A namespaced identity: its Role proves the namespace exists.
		nv.exists = true
		nv.skipped = append(nv.skipped, "the namespace's Pod Security level (get namespaces)")
	case apierrors.IsNotFound(err):
		ok, err := e.allowed(ctx, authzv1.ResourceAttributes{Verb: "create", Resource: "namespaces"})
		if err != nil {
			return err
		}
		if !ok {
			nv.permissions = &MissingPermissions{Namespace: ns, Missing: []string{"create namespaces (core), cluster-wide: the namespace does not exist"}}
		}
		return nil // nothing in it to read: the apply creates it
	default:
		return fmt.Errorf("read namespace %s: %w", ns, err)
	}
	rules := RequiredRules
	if c.Kubernetes().SandboxDriver != nil {
		rules = append(append([]rbacv1.PolicyRule{}, rules...), SandboxRules...)
	}
	if err := e.CheckRules(ctx, ns, rules); err != nil {
		var mp *MissingPermissions
		if !errors.As(err, &mp) {
			return err
		}
		nv.permissions = mp
		return nil
	}
	ok, err := e.mayPreflight(ctx, ns, "", "pods", "create")
	if err != nil {
		return err
	}
	if nv.dryRunPods = ok; ok {
		return nil // the API server judges the Pods itself
	}
	if ok, err := e.mayPreflight(ctx, ns, "", "resourcequotas", "list"); err != nil {
		return err
	} else if ok {
		list, err := e.Client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list resource quotas in %s: %w", ns, err)
		}
		nv.quotas = list.Items
	} else {
		nv.skipped = append(nv.skipped, "the namespace's ResourceQuotas (list resourcequotas)")
	}
	if ok, err := e.mayPreflight(ctx, ns, "", "limitranges", "list"); err != nil {
		return err
	} else if ok {
		list, err := e.Client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list limit ranges in %s: %w", ns, err)
		}
		nv.limits = list.Items
	} else {
		nv.skipped = append(nv.skipped, "the namespace's LimitRanges (list limitranges)")
	}
	return nil
}

// warnSkipped says once per cluster, and once per namespace, which checks
// the identity may not make.
func (e *Executor) warnSkipped(cache *preflightCache, cv *clusterView, nv *namespaceView, out *executor.Preflighted) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	var skipped []string
	if !cv.warned && len(cv.skipped) > 0 {
		cv.warned = true
		skipped = append(skipped, cv.skipped...)
	}
	if !nv.warned && len(nv.skipped) > 0 {
		nv.warned = true
		skipped = append(skipped, nv.skipped...)
	}
	if len(skipped) == 0 {
		return
	}
	out.Warn("The plan's preflight did not check everything",
		"The provider's Kubernetes identity may not read: "+strings.Join(skipped, "; ")+". The apply meets these as they are. "+
			"Grant the ClusterRole "+PreflightClusterRole+" (examples/kubernetes-role/preflight-role.yaml) and the namespace reads of "+ProviderClusterRole+
			" to check them at plan, or set the provider's preflight = false.")
}

// takenName reads, in the deploy's order, each name an update's revision
// would write and returns the deploy's own refusal for the first that
// another object holds (foreignObject, checkOwned); nil when every name is
// free or the agent's. An error reading is the deploy's too. A first
// deploy's names are judged by dryRunCreate.
func (e *Executor) takenName(ctx context.Context, rev *admission.Revision, objs *render.Objects) error {
	ns, agent := objs.Namespace, rev.Agent
	type getFunc func(context.Context, string) (metav1.Object, error)
	type named struct {
		kind, name string
		get        getFunc
	}
	c, none := e.Client.CoreV1(), metav1.GetOptions{}
	secret := getFunc(func(ctx context.Context, n string) (metav1.Object, error) { return c.Secrets(ns).Get(ctx, n, none) })
	check := func(list []named) error {
		for _, o := range list {
			cur, err := o.get(ctx, o.name)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("read %s %s: %w", o.kind, o.name, err)
			case !ours(cur, agent):
				return foreignObject(o.kind, ns, cur, agent)
			}
		}
		return nil
	}
	tokens := []named{{"Secret", render.GatewayTokenSecret(agent), secret}}
	if rev.Harness == admission.HarnessCodex {
		tokens = append(tokens, named{"Secret", render.AppServerTokenSecret(agent), secret})
	}
	if err := check(tokens); err != nil {
		return err
	}
	var rest []named
	for _, sa := range objs.ServiceAccounts {
		rest = append(rest, named{"ServiceAccount", *sa.Name, func(ctx context.Context, n string) (metav1.Object, error) {
			return c.ServiceAccounts(ns).Get(ctx, n, none)
		}})
	}
	for _, cm := range objs.ConfigMaps {
		rest = append(rest, named{"ConfigMap", *cm.Name, func(ctx context.Context, n string) (metav1.Object, error) { return c.ConfigMaps(ns).Get(ctx, n, none) }})
	}
	for _, np := range objs.NetworkPolicies {
		rest = append(rest, named{"NetworkPolicy", *np.Name, func(ctx context.Context, n string) (metav1.Object, error) {
			return e.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, n, none)
		}})
	}
	if err := check(rest); err != nil {
		return err
	}
	if s := objs.HarnessService; s != nil {
		if err := e.checkOwned(ctx, ns, *s.Name, agent); err != nil {
			return err
		}
	}
	var deps []named
	for _, d := range objs.Deployments {
		deps = append(deps, named{"Deployment", *d.Name, func(ctx context.Context, n string) (metav1.Object, error) {
			return e.Client.AppsV1().Deployments(ns).Get(ctx, n, none)
		}})
	}
	return check(deps)
}

// dryRun writes every object of an update's revision with dryRun=All:
// the API server validates, defaults and admits each (quota on object
// counts, immutable fields, admission webhooks and policies) and stores
// nothing. Each refusal is worded as the deploy's write of it would be. A
// first deploy's are dryRunCreate's.
func (e *Executor) dryRun(ctx context.Context, objs *render.Objects) []error {
	ns := objs.Namespace
	dry := metav1.ApplyOptions{FieldManager: render.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
	var errs []error
	fail := func(what, name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("apply %s %s: %w", what, name, err))
		}
	}
	for _, sa := range objs.ServiceAccounts {
		_, err := e.Client.CoreV1().ServiceAccounts(ns).Apply(ctx, sa, dry)
		fail("ServiceAccount", *sa.Name, err)
	}
	for _, cm := range objs.ConfigMaps {
		// The deploy creates each immutable ConfigMap of the revision; one
		// already under its name is an earlier attempt's, which the deploy
		// keeps (same content) or replaces (applyConfigMap).
		obj, err := asObject[corev1.ConfigMap](cm)
		if err == nil {
			_, err = e.Client.CoreV1().ConfigMaps(ns).Create(ctx, obj, metav1.CreateOptions{FieldManager: render.FieldManager, DryRun: []string{metav1.DryRunAll}})
		}
		if !apierrors.IsAlreadyExists(err) {
			fail("ConfigMap", *cm.Name, err)
		}
	}
	for _, np := range objs.NetworkPolicies {
		_, err := e.Client.NetworkingV1().NetworkPolicies(ns).Apply(ctx, np, dry)
		fail("NetworkPolicy", *np.Name, err)
	}
	if s := objs.HarnessService; s != nil {
		_, err := e.Client.CoreV1().Services(ns).Apply(ctx, s, dry)
		fail("Service", *s.Name, err)
	}
	for _, s := range objs.Sandboxes {
		if e.Dynamic == nil {
			break
		}
		obj, err := s.Object(ns)
		if err == nil {
			_, err = e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).Apply(ctx, s.Name, &unstructured.Unstructured{Object: obj}, dry)
		}
		fail("Sandbox", s.Name, err)
	}
	for _, d := range objs.Deployments {
		_, err := e.Client.AppsV1().Deployments(ns).Apply(ctx, d, dry)
		fail("Deployment", *d.Name, err)
	}
	_, err := e.Client.CoreV1().Services(ns).Apply(ctx, objs.Service, dry)
	fail("Service", *objs.Service.Name, err)
	return errs
}

// dryRunCreate is takenName and dryRun for a first deploy (serving 0),
// with one request per object where no name is held, the common case: a
// dry-run create both has the API server judge the object and finds its
// name free. Only a name whose create fails is read, and a held one is
// judged as takenName judges it, in takenName's order: the first that is
// another's is the one refusal (taken), as there. An object the agent
// already has under its name (an earlier attempt's) is judged as dryRun
// judges it: a dry-run apply, or kept as it is (its token Secrets, its
// immutable ConfigMaps). free names the ServiceAccounts that do not exist.
func (e *Executor) dryRunCreate(ctx context.Context, rev *admission.Revision, objs *render.Objects) (taken error, errs []error, free map[string]bool) {
	ns, agent := objs.Namespace, rev.Agent
	c, nps, deps := e.Client.CoreV1(), e.Client.NetworkingV1().NetworkPolicies(ns), e.Client.AppsV1().Deployments(ns)
	none := metav1.GetOptions{}
	dryCreate := metav1.CreateOptions{FieldManager: render.FieldManager, DryRun: []string{metav1.DryRunAll}}
	dry := metav1.ApplyOptions{FieldManager: render.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
	// object is one name of the revision: its dry run; how a name its
	// create finds held is read and judged (nil judge: the agent's when
	// ours); its dry-run apply when the agent holds it (nil: kept as it is).
	type object struct {
		kind, name string
		dryRun     func(context.Context) error
		get        func(context.Context) (metav1.Object, error)
		judge      func(metav1.Object) error
		update     func(context.Context) error
		err        error // the dry run's
		held       bool  // read and found the agent's
	}
	var ordered, names []*object // in dryRun's order; in takenName's
	token := func(name, key, component string) *object {
		s := tokenSecret(ns, agent, name, key, component, "preflight")
		return &object{kind: "Secret", name: name,
			dryRun: func(ctx context.Context) error { _, err := c.Secrets(ns).Create(ctx, s, dryCreate); return err },
			get:    func(ctx context.Context) (metav1.Object, error) { return c.Secrets(ns).Get(ctx, name, none) }}
	}
	service := func(ac *corev1ac.ServiceApplyConfiguration, judge func(metav1.Object) error) *object {
		return &object{kind: "Service", name: *ac.Name, judge: judge,
			dryRun: func(ctx context.Context) error {
				return createAs[corev1.Service](ctx, ac, c.Services(ns).Create, dryCreate)
			},
			get:    func(ctx context.Context) (metav1.Object, error) { return c.Services(ns).Get(ctx, *ac.Name, none) },
			update: func(ctx context.Context) error { _, err := c.Services(ns).Apply(ctx, ac, dry); return err }}
	}
	tokens := []*object{token(render.GatewayTokenSecret(agent), render.GatewayTokenKey, render.ComponentGateway)}
	if rev.Harness == admission.HarnessCodex {
		tokens = append(tokens, token(render.AppServerTokenSecret(agent), render.AppServerTokenKey, render.ComponentHarness))
	}
	agentService := service(objs.Service, func(cur metav1.Object) error { return judgeCreate(cur.(*corev1.Service), rev, ns) })
	ordered = append(ordered, tokens...)
	names = append(append(names, tokens...), agentService)
	var rest []*object
	for _, sa := range objs.ServiceAccounts {
		rest = append(rest, &object{kind: "ServiceAccount", name: *sa.Name,
			dryRun: func(ctx context.Context) error {
				return createAs[corev1.ServiceAccount](ctx, sa, c.ServiceAccounts(ns).Create, dryCreate)
			},
			get: func(ctx context.Context) (metav1.Object, error) {
				return c.ServiceAccounts(ns).Get(ctx, *sa.Name, none)
			},
			update: func(ctx context.Context) error { _, err := c.ServiceAccounts(ns).Apply(ctx, sa, dry); return err }})
	}
	for _, cm := range objs.ConfigMaps {
		rest = append(rest, &object{kind: "ConfigMap", name: *cm.Name,
			dryRun: func(ctx context.Context) error {
				return createAs[corev1.ConfigMap](ctx, cm, c.ConfigMaps(ns).Create, dryCreate)
			},
			get: func(ctx context.Context) (metav1.Object, error) { return c.ConfigMaps(ns).Get(ctx, *cm.Name, none) }})
	}
	for _, np := range objs.NetworkPolicies {
		rest = append(rest, &object{kind: "NetworkPolicy", name: *np.Name,
			dryRun: func(ctx context.Context) error {
				return createAs[networkingv1.NetworkPolicy](ctx, np, nps.Create, dryCreate)
			},
			get:    func(ctx context.Context) (metav1.Object, error) { return nps.Get(ctx, *np.Name, none) },
			update: func(ctx context.Context) error { _, err := nps.Apply(ctx, np, dry); return err }})
	}
	if hs := objs.HarnessService; hs != nil {
		rest = append(rest, service(hs, func(cur metav1.Object) error { return judgeOwned(cur.(*corev1.Service), agent) }))
	}
	ordered, names = append(ordered, rest...), append(names, rest...)
	for _, s := range objs.Sandboxes {
		// Not a name takenName reads: its dry-run apply, as dryRun's.
		if e.Dynamic == nil {
			break
		}
		ordered = append(ordered, &object{kind: "Sandbox", name: s.Name, dryRun: func(ctx context.Context) error {
			obj, err := s.Object(ns)
			if err == nil {
				_, err = e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).Apply(ctx, s.Name, &unstructured.Unstructured{Object: obj}, dry)
			}
			return err
		}})
	}
	for _, d := range objs.Deployments {
		o := &object{kind: "Deployment", name: *d.Name,
			dryRun: func(ctx context.Context) error { return createAs[appsv1.Deployment](ctx, d, deps.Create, dryCreate) },
			get:    func(ctx context.Context) (metav1.Object, error) { return deps.Get(ctx, *d.Name, none) },
			update: func(ctx context.Context) error { _, err := deps.Apply(ctx, d, dry); return err }}
		ordered, names = append(ordered, o), append(names, o)
	}
	ordered = append(ordered, agentService)

	// The dry runs are independent: all at once, so that the preflight
	// waits for one round trip, not one per object.
	var wg sync.WaitGroup
	for _, o := range ordered {
		wg.Go(func() { o.err = o.dryRun(ctx) })
	}
	wg.Wait()
	for _, o := range names {
		if o.err == nil {
			continue // free
		}
		cur, err := o.get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			continue // refused for what it is, not for its name
		case err != nil:
			return fmt.Errorf("read %s %s: %w", o.kind, o.name, err), nil, nil
		case o.judge != nil:
			if err := o.judge(cur); err != nil {
				return err, nil, nil
			}
		case !ours(cur, agent):
			return foreignObject(o.kind, ns, cur, agent), nil, nil
		}
		o.held = true
	}
	free = map[string]bool{}
	for _, o := range ordered {
		var err error
		switch {
		case o.err == nil:
			if o.kind == "ServiceAccount" {
				free[o.name] = true
			}
		case !o.held:
			err = o.err
		case o.update != nil:
			err = o.update(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("apply %s %s: %w", o.kind, o.name, err))
		}
	}
	return nil, errs, free
}

// createAs creates apply configuration ac as the typed object T with
// create (a typed client's Create), dropping what it returns.
func createAs[T any](ctx context.Context, ac any, create func(context.Context, *T, metav1.CreateOptions) (*T, error), opts metav1.CreateOptions) error {
	obj, err := asObject[T](ac)
	if err == nil {
		_, err = create(ctx, obj, opts)
	}
	return err
}

// preflightPod is one Pod a revision would run: its component, its
// metadata and spec as the API server would see them.
type preflightPod struct {
	component string
	meta      metav1.ObjectMeta
	spec      corev1.PodSpec
	requests  corev1.ResourceList
	// admitted: spec is as the API server's admission left it (a dry-run
	// create), its placement (node selector, tolerations) exact. Else
	// admission may still add placement the preflight cannot see (a
	// cluster's default node selector), so the fit judges it against
	// every schedulable node.
	admitted bool
}

// dryRunPod creates p with dryRun=All, as its Deployment's ReplicaSet
// would: a refusal is the deploy's REPLICA_FAILURE, in the API server's
// words; an admitted Pod's spec replaces p's. A ServiceAccount the apply
// has not written yet is asked as the namespace's default one; free names
// those the preflight already found missing (no read for them).
func (e *Executor) dryRunPod(ctx context.Context, p *preflightPod, free map[string]bool) error {
	pod := &corev1.Pod{ObjectMeta: *p.meta.DeepCopy(), Spec: *p.spec.DeepCopy()}
	pod.Name, pod.GenerateName = "", "preflight-"+p.component+"-"
	if sa := pod.Spec.ServiceAccountName; free[sa] {
		pod.Spec.ServiceAccountName = ""
	} else if sa != "" {
		if _, err := e.Client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, sa, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			pod.Spec.ServiceAccountName = ""
		}
	}
	got, err := e.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: render.FieldManager, DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		p.spec, p.requests, p.admitted = got.Spec, podRequests(&got.Spec), true
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		msg := err.Error()
		return &Failure{Code: executor.ReplicaFailure, Component: p.component, Phase: "pod creation",
			Reason: fmt.Sprintf("the API server refuses %s: %s", componentName(*p)[4:], msg), Next: replicaFailureNext(msg)}
	}
	return fmt.Errorf("dry-run create of %s: %w", componentName(*p)[4:], err)
}

// podsOf are the Pods of a revision's workloads and Sandboxes.
func podsOf(objs *render.Objects) []preflightPod {
	var out []preflightPod
	add := func(component string, tmpl any) {
		b, err := json.Marshal(tmpl)
		if err != nil {
			return
		}
		var t corev1.PodTemplateSpec
		if json.Unmarshal(b, &t) != nil {
			return
		}
		t.Namespace = objs.Namespace
		out = append(out, preflightPod{component: component, meta: t.ObjectMeta, spec: t.Spec, requests: podRequests(&t.Spec)})
	}
	for _, d := range objs.Deployments {
		add(d.Spec.Template.Labels[render.LabelComponent], d.Spec.Template)
	}
	for _, s := range objs.Sandboxes {
		add(s.Component, s.Template)
	}
	return out
}

// podRequests is what a Pod requests of its node, as the scheduler counts
// it: its containers (and sidecars) together, or its largest init
// container, whichever is more; a container that sets only a limit
// requests its limit (the API server's defaulting).
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	of := func(c *corev1.Container) corev1.ResourceList {
		out := corev1.ResourceList{}
		for k, v := range c.Resources.Limits {
			out[k] = v.DeepCopy()
		}
		for k, v := range c.Resources.Requests {
			out[k] = v.DeepCopy()
		}
		return out
	}
	sum := corev1.ResourceList{}
	for i := range spec.Containers {
		addList(sum, of(&spec.Containers[i]))
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sum, of(c))
			continue
		}
		for k, v := range of(c) {
			if cur, ok := sum[k]; !ok || v.Cmp(cur) > 0 {
				sum[k] = v
			}
		}
	}
	return sum
}

func addList(to, from corev1.ResourceList) {
	for k, v := range from {
		cur := to[k]
		cur.Add(v)
		to[k] = cur
	}
}

func add(m map[string]corev1.ResourceList, key string, l corev1.ResourceList) {
	if m[key] == nil {
		m[key] = corev1.ResourceList{}
	}
	addList(m[key], l)
}

// ownPods are the agent's Pods now running (what a new revision replaces:
// both executions stop them before, or as, the new ones start), when the
// plan replaces them.
func (cv *clusterView) ownPods(ns, agent string, replacing bool) []podUse {
	if !replacing || !cv.podsRead {
		return nil
	}
	return cv.agentPods[ns+"/"+agent]
}

// scheduled are the resources the fit compares.
var scheduled = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// fit says whether each of the agent's Pods finds a schedulable node with
// room for its requests: refused when no node could hold it even empty,
// or none has room now (what its Pods request, less the agent's own Pods
// that the new revision replaces); a warning when there is room now but
// the agents preflighted before it in this plan would take it first. The
// room each Pod is given is reserved for the agents after it.
func (cv *clusterView) fit(agent string, pods []preflightPod, own []podUse) (error, string) {
	if !cv.nodesRead || len(pods) == 0 {
		return nil, ""
	}
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.planned == nil {
		cv.planned = map[string]corev1.ResourceList{}
	}
	freed := map[string]corev1.ResourceList{}
	for _, p := range own {
		add(freed, p.node, p.requests)
	}
	var warnings []string
	for _, p := range pods {
		var candidates []*corev1.Node
		var excluded []string
		for i := range cv.nodes {
			n := &cv.nodes[i]
			spec := &p.spec
			if !p.admitted {
				spec = &corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}
			}
			if why := unschedulableFor(n, spec); why != "" {
				excluded = append(excluded, n.Name+": "+why)
				continue
			}
			candidates = append(candidates, n)
		}
		if len(candidates) == 0 {
			sort.Strings(excluded)
			return unschedulable(agent, p, "no node can run it: "+strings.Join(limitLines(excluded, 5), "; "),
				"Change the compute's node_selector or tolerations to match a schedulable node, or add such a node; then apply again."), ""
		}
		var empty, now, planned *corev1.Node
		var most roomiest
		for _, n := range candidates {
			alloc := n.Status.Allocatable
			if !covers(alloc, p.requests, nil) {
				most.offer(n.Name, alloc)
				continue
			}
			if empty == nil {
				empty = n
			}
			if !cv.podsRead {
				continue
			}
			used := corev1.ResourceList{}
			addList(used, cv.requested[n.Name])
			sub(used, freed[n.Name])
			if !covers(alloc, p.requests, used) {
				most.offer(n.Name, free(alloc, used))
				continue
			}
			if now == nil {
				now = n
			}
			addList(used, cv.planned[n.Name])
			if covers(alloc, p.requests, used) && planned == nil {
				planned = n
			}
		}
		want := describe(p.requests)
		switch {
		case empty == nil:
			return unschedulable(agent, p, fmt.Sprintf("it requests %s and no schedulable node has that much allocatable (the most: %s)", want, most),
				"Lower the compute's cpu_request/memory_request (or cpu_limit/memory_limit, which they default to), or add a larger node; then apply again."), ""
		case !cv.podsRead:
			add(cv.planned, empty.Name, p.requests)
		case now == nil:
			return unschedulable(agent, p, fmt.Sprintf("it requests %s and no schedulable node has that much free now: what their Pods request leaves at most %s", want, most),
				"Free room (remove agents or workloads from the nodes), lower the compute's cpu_request/memory_request, or add a node; then apply again."), ""
		case planned == nil:
			warnings = append(warnings, fmt.Sprintf("%s requests %s: a node has room for it now (%s), but the agents planned before it in this plan would take that room first; "+
				"the apply of whichever comes last may fail with UNSCHEDULABLE", componentName(p), want, now.Name))
			add(cv.planned, now.Name, p.requests)
		default:
			add(cv.planned, planned.Name, p.requests)
		}
	}
	return nil, strings.Join(warnings, "; ")
}

func componentName(p preflightPod) string {
	if p.component == "" {
		return "its Pod"
	}
	return "its " + p.component + " Pod"
}

func unschedulable(agent string, p preflightPod, reason, next string) *Failure {
	return &Failure{Code: executor.Unschedulable, Component: p.component, Phase: "scheduling", Reason: componentName(p)[4:] + " cannot be scheduled: " + reason, Next: next}
}

func limitLines(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("and %d more", len(l)-n))
}

// unschedulableFor says why the scheduler would not place a Pod of spec
// on node n at all ("" when it may).
func unschedulableFor(n *corev1.Node, spec *corev1.PodSpec) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "not Ready"
	}
	if len(spec.NodeSelector) > 0 && !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return "its labels do not match the node_selector"
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range spec.Tolerations {
			if spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return fmt.Sprintf("taint %s=%s:%s is not tolerated", t.Key, t.Value, t.Effect)
		}
	}
	return ""
}

// covers reports whether alloc less used holds want, for the resources
// the scheduler compares.
func covers(alloc, want, used corev1.ResourceList) bool {
	for _, r := range scheduled {
		w, ok := want[r]
		if !ok || w.IsZero() {
			continue
		}
		a, ok := alloc[r]
		if !ok {
			continue // a node that does not report it is not limited by it
		}
		a = a.DeepCopy()
		if u, ok := used[r]; ok {
			a.Sub(u)
		}
		if a.Cmp(w) < 0 {
			return false
		}
	}
	return true
}

func sub(from, l corev1.ResourceList) {
	for k, v := range l {
		if cur, ok := from[k]; ok {
			cur.Sub(v)
			from[k] = cur
		}
	}
}

func free(alloc, used corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range scheduled {
		if a, ok := alloc[r]; ok {
			a = a.DeepCopy()
			if u, ok := used[r]; ok {
				a.Sub(u)
			}
			out[r] = a
		}
	}
	return out
}

// roomiest is the node with the most CPU to offer, for the message.
type roomiest struct {
	node string
	room corev1.ResourceList
}

func (r *roomiest) offer(node string, room corev1.ResourceList) {
	if r.node == "" || room.Cpu().Cmp(*r.room.Cpu()) > 0 {
		r.node, r.room = node, room
	}
}

func (r roomiest) String() string { return r.node + " with " + describe(r.room) }

// describe writes cpu and memory as users write them.
func describe(l corev1.ResourceList) string {
	var parts []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[r]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", r, q.String()))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// podSecurity evaluates each Pod against the namespace's enforced Pod
// Security level with the Pod Security admission's own evaluator (the
// one the API server runs): a Pod it refuses is the deploy's
// REPLICA_FAILURE, its Deployment then never getting a Pod.
func podSecurity(nv *namespaceView, pods []preflightPod) []error {
	if !nv.known {
		return nil
	}
	policy, errs := psaapi.PolicyToEvaluate(nv.labels, psaapi.Policy{Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}})
	if len(errs) > 0 || policy.Enforce.Level == psaapi.LevelPrivileged {
		return nil
	}
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return nil
	}
	var out []error
	for _, p := range pods {
		res := psapolicy.AggregateCheckResults(evaluator.EvaluatePod(policy.Enforce, &p.meta, &p.spec))
		if res.Allowed {
			continue
		}
		msg := fmt.Sprintf("violates PodSecurity %q: %s", policy.Enforce.String(), res.ForbiddenDetail())
		out = append(out, &Failure{Code: executor.ReplicaFailure, Component: p.component, Phase: "pod creation",
			Reason: fmt.Sprintf("the API server refuses %s: %s", componentName(p)[4:], msg),
			Next:   "The namespace enforces Pod Security level " + string(policy.Enforce.Level) + " (label pod-security.kubernetes.io/enforce); run the agent in a namespace that allows it, then apply again."})
	}
	return out
}

// limitRanges checks each container and Pod against the namespace's
// LimitRanges (maximum and minimum, and the limit-to-request ratio), as
// the LimitRanger admission does at the Pod's creation.
func limitRanges(nv *namespaceView, pods []preflightPod) []error {
	var out []error
	for _, lr := range nv.limits {
		for _, item := range lr.Spec.Limits {
			for _, p := range pods {
				check := func(who string, limits, requests corev1.ResourceList) {
					for r, max := range item.Max {
						if l, ok := limits[r]; ok && l.Cmp(max) > 0 {
							out = append(out, limitRangeFailure(lr.Name, p, fmt.Sprintf("maximum %s usage per %s is %s, but limit is %s", r, who, max.String(), l.String())))
						}
					}
					for r, min := range item.Min {
						if q, ok := requests[r]; ok && q.Cmp(min) < 0 {
							out = append(out, limitRangeFailure(lr.Name, p, fmt.Sprintf("minimum %s usage per %s is %s, but request is %s", r, who, min.String(), q.String())))
						}
					}
					for r, ratio := range item.MaxLimitRequestRatio {
						l, lok := limits[r]
						q, qok := requests[r]
						if lok && qok && !q.IsZero() && float64(l.MilliValue())/float64(q.MilliValue()) > ratio.AsApproximateFloat64() {
							out = append(out, limitRangeFailure(lr.Name, p, fmt.Sprintf("%s max limit to request ratio per %s is %s, but provided ratio is %.6f", r, who, ratio.String(),
								float64(l.MilliValue())/float64(q.MilliValue()))))
						}
					}
				}
				switch item.Type {
				case corev1.LimitTypeContainer:
					for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
						check("Container", c.Resources.Limits, podRequests(&corev1.PodSpec{Containers: []corev1.Container{c}}))
					}
				case corev1.LimitTypePod:
					var limits corev1.ResourceList = corev1.ResourceList{}
					for _, c := range p.spec.Containers {
						addList(limits, c.Resources.Limits)
					}
					check("Pod", limits, p.requests)
				}
			}
		}
	}
	return out
}

func limitRangeFailure(name string, p preflightPod, msg string) *Failure {
	return &Failure{Code: executor.ReplicaFailure, Component: p.component, Phase: "pod creation",
		Reason: fmt.Sprintf("the API server refuses %s: LimitRange %s: %s", componentName(p)[4:], name, msg),
		Next:   replicaFailureNext("LimitRange")}
}

// quotaKeys map a ResourceQuota's keys to what a Pod counts toward them.
var quotaKeys = map[corev1.ResourceName]func(p preflightPod) (resource.Quantity, bool){
	corev1.ResourceRequestsCPU:              requestOf(corev1.ResourceCPU),
	corev1.ResourceCPU:                      requestOf(corev1.ResourceCPU),
	corev1.ResourceRequestsMemory:           requestOf(corev1.ResourceMemory),
	corev1.ResourceMemory:                   requestOf(corev1.ResourceMemory),
	corev1.ResourceRequestsEphemeralStorage: requestOf(corev1.ResourceEphemeralStorage),
	corev1.ResourceLimitsCPU:                limitOf(corev1.ResourceCPU),
	corev1.ResourceLimitsMemory:             limitOf(corev1.ResourceMemory),
	corev1.ResourceLimitsEphemeralStorage:   limitOf(corev1.ResourceEphemeralStorage),
	corev1.ResourcePods: func(preflightPod) (resource.Quantity, bool) {
		return *resource.NewQuantity(1, resource.DecimalSI), true
	},
	"count/pods": func(preflightPod) (resource.Quantity, bool) {
		return *resource.NewQuantity(1, resource.DecimalSI), true
	},
}

func requestOf(r corev1.ResourceName) func(p preflightPod) (resource.Quantity, bool) {
	return func(p preflightPod) (resource.Quantity, bool) { q, ok := p.requests[r]; return q, ok }
}

func limitOf(r corev1.ResourceName) func(p preflightPod) (resource.Quantity, bool) {
	return func(p preflightPod) (resource.Quantity, bool) {
		var sum resource.Quantity
		found := false
		for _, c := range p.spec.Containers {
			if q, ok := c.Resources.Limits[r]; ok {
				sum.Add(q)
				found = true
			}
		}
		return sum, found
	}
}

// quota checks the agent's Pods against the namespace's unscoped
// ResourceQuotas (what they already count, less the agent's own Pods that
// the new revision replaces): refused when they do not fit now, a warning
// when they fit alone but not beside the agents preflighted before them.
func (nv *namespaceView) quota(agent string, pods []preflightPod, own []podUse) (error, string) {
	if len(nv.quotas) == 0 || len(pods) == 0 {
		return nil, ""
	}
	nv.mu.Lock()
	defer nv.mu.Unlock()
	if nv.planned == nil {
		nv.planned = corev1.ResourceList{}
	}
	need := corev1.ResourceList{}
	for key, of := range quotaKeys {
		for _, p := range pods {
			if q, ok := of(p); ok {
				cur := need[key]
				cur.Add(q)
				need[key] = cur
			}
		}
	}
	freed := corev1.ResourceList{}
	for _, p := range own {
		for key := range quotaKeys {
			switch key {
			case corev1.ResourcePods, "count/pods":
				cur := freed[key]
				cur.Add(*resource.NewQuantity(1, resource.DecimalSI))
				freed[key] = cur
			case corev1.ResourceRequestsCPU, corev1.ResourceCPU:
				addOne(freed, key, p.requests[corev1.ResourceCPU])
			case corev1.ResourceRequestsMemory, corev1.ResourceMemory:
				addOne(freed, key, p.requests[corev1.ResourceMemory])
			}
		}
	}
	var warning string
	for _, q := range nv.quotas {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue // a scoped quota counts only some Pods: the apply decides
		}
		for key, hard := range q.Status.Hard {
			n, ok := need[key]
			if !ok {
				continue
			}
			used := q.Status.Used[key].DeepCopy()
			if f, ok := freed[key]; ok {
				used.Sub(f)
			}
			total := used.DeepCopy()
			total.Add(n)
			if total.Cmp(hard) > 0 {
				return &Failure{Code: executor.ReplicaFailure, Phase: "pod creation",
					Reason: fmt.Sprintf("the API server refuses the agent's Pods: exceeded quota: %s, requested: %s=%s, used: %s=%s, limited: %s=%s",
						q.Name, key, n.String(), key, used.String(), key, hard.String()),
					Next: replicaFailureNext("quota")}, ""
			}
			total.Add(nv.planned[key])
			if total.Cmp(hard) > 0 && warning == "" {
				warning = fmt.Sprintf("ResourceQuota %s allows %s=%s; %s is used and the agents planned before this one in this plan would take %s of it, "+
					"so the apply of whichever comes last may fail with REPLICA_FAILURE", q.Name, key, hard.String(), used.String(), ptr.To(nv.planned[key]).String())
			}
		}
	}
	addList(nv.planned, need)
	return nil, warning
}

func addOne(l corev1.ResourceList, key corev1.ResourceName, q resource.Quantity) {
	cur := l[key]
	cur.Add(q)
	l[key] = cur
}

// checkClaim checks the agent's state claim as the deploy would: an
// existing claim against what the revision asks of it (ensureClaim's
// checks); a new one against the StorageClasses.
func (e *Executor) checkClaim(ctx context.Context, cv *clusterView, nv *namespaceView, objs *render.Objects, agent string, serving int64) error {
	want := objs.StateClaim
	if want == nil {
		return nil
	}
	if nv.exists {
		cur, err := e.Client.CoreV1().PersistentVolumeClaims(objs.Namespace).Get(ctx, *want.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			if serving == 0 && cur.DeletionTimestamp != nil && ownedBy(cur, agent) {
				return nil // an earlier destroy's: the deploy waits for it
			}
			if bad := claimMismatch(cur, want, agent); bad.what != "" {
				return claimFailure(agent, cur.Name, want, bad, "")
			}
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read PersistentVolumeClaim %s: %w", *want.Name, err)
		}
	}
	if !cv.classesRead {
		return nil
	}
	class := ptr.Deref(want.Spec.StorageClassName, "")
	switch {
	case class != "" && !cv.storageClasses[class]:
		return claimFailure(agent, *want.Name, want, claimProblem{what: "it does not bind"}, fmt.Sprintf("storageclass.storage.k8s.io %q not found", class))
	case class == "" && cv.defaultClass == "":
		return claimFailure(agent, *want.Name, want, claimProblem{what: "it does not bind"}, "the cluster has no default StorageClass and the compute's state.storage_class names none")
	}
	return nil
}

// pullSecretExists reads a pull Secret's existence once per namespace.
func (e *Executor) pullSecretExists(ctx context.Context, nv *namespaceView, ns, name string) bool {
	nv.mu.Lock()
	defer nv.mu.Unlock()
	if nv.pullSecrets == nil {
		nv.pullSecrets = map[string]bool{}
	}
	if ok, seen := nv.pullSecrets[name]; seen {
		return ok
	}
	_, err := e.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	ok := !apierrors.IsNotFound(err) // a read that fails otherwise says nothing
	nv.pullSecrets[name] = ok
	return ok
}
