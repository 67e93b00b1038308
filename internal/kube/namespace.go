package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// RequiredRules is the minimal namespaced Role the provider needs in a
// tenant namespace; docs and examples render it from here.
var RequiredRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "create", "patch", "delete", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch", "delete", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "patch", "deletecollection"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "create", "patch", "deletecollection"}},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
}

// OccupantRules are what the provider lists, beside RequiredRules, in a
// namespace it created, when its compute is destroyed: whatever is left
// there (Occupants), by metadata, so that a namespace that still holds
// someone's objects is kept. Granted only inside the computes' namespaces:
// ProviderClusterRole, which NamespaceRoleBinding binds there.
var OccupantRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"secrets", "serviceaccounts"}, Verbs: []string{"list"}},
	{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "daemonsets", "replicasets"}, Verbs: []string{"list"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"list"}},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"list"}},
	{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"list"}},
	{APIGroups: []string{sandboxapi.GVR.Group}, Resources: []string{sandboxapi.GVR.Resource}, Verbs: []string{"list"}},
}

// ProviderClusterRole names the ClusterRole that holds what the provider
// does inside a compute's namespace (RequiredRules and OccupantRules). It
// is bound in no namespace of its own accord: a namespace the provider
// creates gets a RoleBinding of it (NamespaceRoleBinding) to the provider's
// identity, so its rights reach only the computes' namespaces.
const ProviderClusterRole = "occ-provider"

// NamespaceRoleBinding names the RoleBinding of ProviderClusterRole the
// provider writes in a namespace it creates.
const NamespaceRoleBinding = "occ-provider"

// NamespaceLifecycleRules are the small ClusterRole
// (occ-provider-namespaces) a provider that creates its computes'
// namespaces holds at cluster scope, apart from what it does inside them:
// reading, creating, deleting and waiting for a namespace, and binding
// ProviderClusterRole, and only it, in a namespace it created. It grants no
// read of a Secret and no write of a workload anywhere; the namespace
// policy (examples/kubernetes-role/namespace-policy.yaml) holds its
// deletes and bindings to the namespaces the provider created. Docs render
// it from here.
var NamespaceLifecycleRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
	{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{ProviderClusterRole}},
}

// SandboxRules are what the provider needs in a tenant namespace beside
// RequiredRules when its compute has a sandbox driver: the Sandboxes it
// provisions dedicated harnesses with.
var SandboxRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete", "deletecollection"}},
}

// DriverGatewayRules are what the provider needs in the sandbox driver's
// gateway namespace: reading whether the gateway is ready (ND5).
var DriverGatewayRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
}

// CheckPermissions asks the API server, with one SelfSubjectAccessReview per
// verb and resource, whether the provider's identity may do everything it
// will do in ns; the error lists every missing permission.
func (e *Executor) CheckPermissions(ctx context.Context, ns string) error {
	return e.CheckRules(ctx, ns, RequiredRules)
}

// CheckRules is CheckPermissions for any set of rules. The reviews are
// independent: up to reviewConcurrency are asked at once, so that a
// compute's first deploy or preflight (45 reviews for RequiredRules)
// waits for a few round trips, not for 45.
func (e *Executor) CheckRules(ctx context.Context, ns string, rules []rbacv1.PolicyRule) error {
	var (
		mu      sync.Mutex
		missing []string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewConcurrency)
	for _, rule := range rules {
		for _, res := range rule.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, verb := range rule.Verbs {
				g.Go(func() error {
					allowed, err := e.allowed(gctx, authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rule.APIGroups[0], Resource: resource, Subresource: sub})
					if err != nil || allowed {
						return err
					}
					group := rule.APIGroups[0]
					if group == "" {
						group = "core"
					}
					mu.Lock()
					missing = append(missing, fmt.Sprintf("%s %s (%s)", verb, res, group))
					mu.Unlock()
					return nil
				})
			}
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &MissingPermissions{Namespace: ns, Missing: missing}
	}
	return nil
}

// reviewConcurrency bounds the access reviews CheckRules asks at once.
const reviewConcurrency = 8

// allowed asks the API server, with one SelfSubjectAccessReview, whether
// the provider's identity may do what attrs say. An answer of yes is
// remembered for the provider process (grantSet): the plan's preflight,
// the apply's second look before its first write (AD6) and each deploy's
// prepare ask the same questions of one namespace, 45 of them. A no is
// asked again, so that a permission granted since counts.
func (e *Executor) allowed(ctx context.Context, attrs authzv1.ResourceAttributes) (bool, error) {
	key := grantKey(attrs)
	if e.grants.has(key) {
		return true, nil
	}
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	got, err := e.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		where := " in namespace " + attrs.Namespace
		if attrs.Namespace == "" {
			where = " cluster-wide"
		}
		return false, fmt.Errorf("check permissions%s: %w", where, err)
	}
	if got.Status.Allowed {
		e.grants.add(key)
	}
	return got.Status.Allowed, nil
}

// grantSet is the access reviews the API server allowed in this process.
type grantSet struct {
	mu      sync.Mutex
	allowed map[string]bool
}

// grantKey names a review by everything allowed asks about.
func grantKey(a authzv1.ResourceAttributes) string {
	return strings.Join([]string{a.Namespace, a.Verb, a.Group, a.Version, a.Resource, a.Subresource, a.Name}, "\x00")
}

func (g *grantSet) has(key string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.allowed[key]
}

func (g *grantSet) add(key string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allowed[key] = true
}

// MissingPermissions lists what the provider's identity may not do.
type MissingPermissions struct {
	Namespace string
	Missing   []string
}

func (e *MissingPermissions) Error() string {
	return fmt.Sprintf("the provider's identity lacks %d permission(s) in namespace %s: %s", len(e.Missing), e.Namespace, strings.Join(e.Missing, "; "))
}

// EnsureNamespace creates ns when it is missing, labelled as the provider's
// and annotated with the compute it is for, and reports whether it did. In
// a namespace created for the compute it gives the provider its rights
// there (grantInNamespace).
func (e *Executor) EnsureNamespace(ctx context.Context, ns, compute string) (bool, error) {
	got, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		if compute != "" && createdFor(got, compute) {
			// Created for this compute, perhaps before the provider bound
			// its rights in the namespaces it creates: bound now if missing.
			return false, e.grantInNamespace(ctx, ns, compute)
		}
		return false, nil
	case apierrors.IsForbidden(err):
		// A namespaced identity cannot read namespaces; its Role proves the
		// namespace exists, which CheckPermissions verifies next.
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	meta := metav1.ObjectMeta{Name: ns, Labels: map[string]string{render.LabelManagedBy: render.ManagedBy}}
	if compute != "" {
		meta.Annotations = map[string]string{render.AnnotationCompute: compute}
	}
	_, err = e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{FieldManager: render.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if apierrors.IsForbidden(err) {
		// As the plan's preflight words it (preflight.go).
		return false, &MissingPermissions{Namespace: ns, Missing: []string{"create namespaces (core), cluster-wide: the namespace does not exist"}}
	}
	if err != nil {
		return false, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return true, e.grantInNamespace(ctx, ns, compute)
}

// grantInNamespace gives the provider its rights inside a namespace it has
// just created. An identity that already holds them there (a cluster-wide
// grant) gets nothing more. Otherwise it binds ProviderClusterRole, and
// only it, to itself in that namespace (what NamespaceLifecycleRules allow)
// and waits, up to 10 s, until the API server's authorizer sees the binding
// (RBAC is served from informer caches). An identity that may not bind
// writes nothing: the permission check that follows lists what it lacks.
func (e *Executor) grantInNamespace(ctx context.Context, ns, compute string) error {
	holds := func(ctx context.Context) (bool, error) {
		return e.allowed(ctx, authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"})
	}
	if ok, err := holds(ctx); err != nil || ok {
		return err
	}
	self, err := e.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the provider's own identity: %w", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: NamespaceRoleBinding, Namespace: ns,
			Labels:      map[string]string{render.LabelManagedBy: render.ManagedBy},
			Annotations: map[string]string{render.AnnotationCompute: compute}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProviderClusterRole},
		Subjects: []rbacv1.Subject{SubjectOf(self.Status.UserInfo.Username)},
	}
	_, err = e.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{FieldManager: render.FieldManager})
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case err != nil && !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("bind ClusterRole %s in namespace %s: %w", ProviderClusterRole, ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(wctx, 50*time.Millisecond, true, holds)
	if err != nil && ctx.Err() != nil {
		return err
	}
	return nil // past 10 s, the permission check says what is missing
}

// SubjectOf is the RBAC subject of an authenticated user name: a
// ServiceAccount for system:serviceaccount:NAMESPACE:NAME, a User otherwise.
func SubjectOf(username string) rbacv1.Subject {
	if rest, ok := strings.CutPrefix(username, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok && ns != "" && name != "" {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: username}
}

// CreatedFor reports whether ns is a namespace the provider created for the
// compute named compute: also true when an Agent's deploy re-created it after
// someone deleted it. An identity that may not read namespaces cannot have
// created one: false.
func (e *Executor) CreatedFor(ctx context.Context, ns, compute string) (bool, error) {
	got, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	return createdFor(got, compute), nil
}

// createdFor reports whether the provider created ns for the compute named
// compute: labelled as the provider's, annotated with the compute.
func createdFor(ns *corev1.Namespace, compute string) bool {
	return ns.Labels[render.LabelManagedBy] == render.ManagedBy && ns.Annotations[render.AnnotationCompute] == compute
}

// Occupants lists what is left in ns (kind/name) that would go with the
// namespace: objects someone else created, and the provider's own objects of
// Agents or credential sources that another configuration still manages
// there (by the time a compute is destroyed, Terraform has destroyed every
// Agent and credential source of its own configuration, and their deletes
// leave nothing behind). The CA bundle ConfigMap, the default ServiceAccount
// and its token Secrets every namespace gets, and Pods, ReplicaSets and
// Jobs a controller owns, are not counted. ServiceAccounts, workloads of
// every built-in kind, Ingresses, NetworkPolicies, Roles, RoleBindings and
// Sandboxes are.
func (e *Executor) Occupants(ctx context.Context, ns string) ([]string, error) {
	var left []string
	add := func(kind, name string, l map[string]string) {
		switch {
		case l[render.LabelManagedBy] != render.ManagedBy:
			left = append(left, kind+"/"+name)
		case l[render.LabelAgent] != "":
			left = append(left, fmt.Sprintf("%s/%s (agent %s, from another configuration)", kind, name, l[render.LabelAgent]))
		default:
			left = append(left, kind+"/"+name+" (from another configuration)")
		}
	}
	core := e.Client.CoreV1()
	opts := metav1.ListOptions{}
	pods, err := core.Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list Pods in %s: %w", ns, err)
	}
	for _, o := range pods.Items {
		if len(o.OwnerReferences) == 0 {
			add("Pod", o.Name, o.Labels)
		}
	}
	deps, err := e.Client.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list Deployments in %s: %w", ns, err)
	}
	for _, o := range deps.Items {
		add("Deployment", o.Name, o.Labels)
	}
	svcs, err := core.Services(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list Services in %s: %w", ns, err)
	}
	for _, o := range svcs.Items {
		if sandboxOwned(o.OwnerReferences) {
			continue // the sandbox driver's Service of a Sandbox goes with it
		}
		add("Service", o.Name, o.Labels)
	}
	// Secrets by their metadata only: their values never reach the
	// provider for this.
	if e.Metadata != nil {
		secrets, err := e.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list Secrets in %s: %w", ns, err)
		}
		for _, o := range secrets.Items {
			if _, token := o.Annotations[corev1.ServiceAccountNameKey]; !token {
				add("Secret", o.Name, o.Labels)
			}
		}
	} else {
		secrets, err := core.Secrets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list Secrets in %s: %w", ns, err)
		}
		for _, o := range secrets.Items {
			if o.Type != corev1.SecretTypeServiceAccountToken {
				add("Secret", o.Name, o.Labels)
			}
		}
	}
	cms, err := core.ConfigMaps(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list ConfigMaps in %s: %w", ns, err)
	}
	for _, o := range cms.Items {
		if o.Name != "kube-root-ca.crt" {
			add("ConfigMap", o.Name, o.Labels)
		}
	}
	pvcs, err := core.PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims in %s: %w", ns, err)
	}
	for _, o := range pvcs.Items {
		add("PersistentVolumeClaim", o.Name, o.Labels)
	}
	// Every other kind a tenant commonly keeps in a namespace, by
	// metadata: what a controller owns goes with its owner. A kind the
	// provider's identity may not list keeps the namespace (it cannot
	// tell that it is empty); one the cluster does not serve holds nothing.
	if e.Metadata == nil {
		return nil, fmt.Errorf("list what is left in %s: the executor has no metadata client", ns)
	}
	for _, k := range occupantKinds {
		list, err := e.Metadata.Resource(k.gvr).Namespace(ns).List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err):
			left = append(left, fmt.Sprintf("%s (the provider may not list them, so cannot tell whether any is left: add list on %s to its ClusterRole, see the Kubernetes permissions guide)", k.gvr.Resource, k.gvr.GroupResource()))
			continue
		case err != nil:
			return nil, fmt.Errorf("list %s in %s: %w", k.gvr.GroupResource(), ns, err)
		}
		for _, o := range list.Items {
			if len(o.OwnerReferences) > 0 && k.owned {
				continue
			}
			if k.kind == "ServiceAccount" && o.Name == "default" {
				continue // every namespace has it
			}
			if k.kind == "RoleBinding" && o.Name == NamespaceRoleBinding && o.Labels[render.LabelManagedBy] == render.ManagedBy && o.Annotations[render.AnnotationCompute] != "" {
				continue // the provider's own rights in the namespace it created go with it
			}
			add(k.kind, o.Name, o.Labels)
		}
	}
	sort.Strings(left)
	return left, nil
}

// occupantKinds are the kinds Occupants lists beside the core ones; owned:
// an object a controller owns (a Deployment's ReplicaSet, a CronJob's Job)
// is not counted.
var occupantKinds = []struct {
	kind  string
	gvr   schema.GroupVersionResource
	owned bool
}{
	{"ServiceAccount", corev1.SchemeGroupVersion.WithResource("serviceaccounts"), false},
	{"StatefulSet", appsv1.SchemeGroupVersion.WithResource("statefulsets"), false},
	{"DaemonSet", appsv1.SchemeGroupVersion.WithResource("daemonsets"), false},
	{"ReplicaSet", appsv1.SchemeGroupVersion.WithResource("replicasets"), true},
	{"Job", batchv1.SchemeGroupVersion.WithResource("jobs"), true},
	{"CronJob", batchv1.SchemeGroupVersion.WithResource("cronjobs"), false},
	{"Ingress", networkingv1.SchemeGroupVersion.WithResource("ingresses"), false},
	{"NetworkPolicy", networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), false},
	{"Role", rbacv1.SchemeGroupVersion.WithResource("roles"), false},
	{"RoleBinding", rbacv1.SchemeGroupVersion.WithResource("rolebindings"), false},
	{"Sandbox", sandboxapi.GVR, false},
}

// DeleteNamespace removes a namespace the provider created and waits, with
// a watch, until it is gone (so that the same namespace can be created
// again at once), or ctx ends.
func (e *Executor) DeleteNamespace(ctx context.Context, ns string) error {
	nss := e.Client.CoreV1().Namespaces()
	err := nss.Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	sel := fields.OneTermEqualSelector("metadata.name", ns).String()
	var backoff relist
	for {
		list, err := nss.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("wait for namespace %s to be deleted: %w", ns, err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		w, err := nss.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fmt.Errorf("wait for namespace %s to be deleted: %w", ns, err)
		}
		gone, events := false, 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			events++
			if ev.Type == watch.Deleted {
				gone = true
				break
			}
		}
		w.Stop()
		if gone {
			return nil
		}
		if err := backoff.after(ctx, events); err != nil {
			return fmt.Errorf("namespace %s is still terminating: %w", ns, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("namespace %s is still terminating: %w", ns, ctx.Err())
		}
	}
}

// sandboxOwned reports whether an object is controlled by a Sandbox: the
// headless Service the agent-sandbox controller gives each Sandbox, which
// the garbage collector deletes with it.
func sandboxOwned(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.Kind == sandboxapi.Kind && strings.HasPrefix(r.APIVersion, sandboxapi.Group+"/") {
			return true
		}
	}
	return false
}
