package kubeenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Identity is a least-privilege client: a ServiceAccount whose only
// permissions are a Role in one namespace.
type Identity struct {
	Namespace      string
	ServiceAccount string
	// Username is what the API server sees:
	// system:serviceaccount:NAMESPACE:NAME.
	Username string
	// Host and CAPEM are the cluster's; Token is the ServiceAccount's bearer
	// token (valid 24 h).
	Host  string
	CAPEM []byte
	Token string
	// KubeconfigPath is a kubeconfig with the token (default namespace set
	// to Namespace).
	KubeconfigPath string
	Config         *rest.Config
	Clientset      *kubernetes.Clientset
}

// AllInNamespace is every verb on every resource, for the namespace of the
// Role it is in: the widest identity that is still namespaced.
var AllInNamespace = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}

// NamespacedIdentity creates a ServiceAccount in namespace, a Role with
// rules (AllInNamespace when nil) and a RoleBinding, and returns a client
// that authenticates as that ServiceAccount with a TokenRequest token.
// Outside namespace it can do nothing beyond what every authenticated user
// can (discovery, self reviews): other namespaces and cluster-scoped
// resources are Forbidden.
func (c *Cluster) NamespacedIdentity(ctx context.Context, namespace string, rules []rbacv1.PolicyRule) (*Identity, error) {
	if rules == nil {
		rules = AllInNamespace
	}
	name := "occ-test-" + rand.String(5)
	core := c.Clientset.CoreV1()
	if _, err := core.ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create ServiceAccount %s/%s: %w", namespace, name, err)
	}
	rbac := c.Clientset.RbacV1()
	if _, err := rbac.Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      rules,
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create Role %s/%s: %w", namespace, name, err)
	}
	if _, err := rbac.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create RoleBinding %s/%s: %w", namespace, name, err)
	}
	return c.identity(ctx, namespace, name, rules)
}

// ClusterIdentity is NamespacedIdentity with a ClusterRole and a
// ClusterRoleBinding: rules hold in every namespace and at cluster scope.
// The ServiceAccount lives in home.
func (c *Cluster) ClusterIdentity(ctx context.Context, home string, rules []rbacv1.PolicyRule) (*Identity, error) {
	name := "occ-test-" + rand.String(5)
	if _, err := c.Clientset.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create ClusterRole %s: %w", name, err)
	}
	return c.boundIdentity(ctx, home, name, name, rules)
}

// BoundIdentity is a ServiceAccount in home bound, by a
// ClusterRoleBinding of its own, to the existing ClusterRole clusterRole,
// whose rules are rules (waited for as NamespacedIdentity does). Cleanup
// is the caller's: the ClusterRoleBinding is named like the ServiceAccount.
func (c *Cluster) BoundIdentity(ctx context.Context, home, clusterRole string, rules []rbacv1.PolicyRule) (*Identity, error) {
	return c.boundIdentity(ctx, home, "occ-test-"+rand.String(5), clusterRole, rules)
}

// boundIdentity creates ServiceAccount home/name and a ClusterRoleBinding
// name of clusterRole to it.
func (c *Cluster) boundIdentity(ctx context.Context, home, name, clusterRole string, rules []rbacv1.PolicyRule) (*Identity, error) {
	if _, err := c.Clientset.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create ServiceAccount %s/%s: %w", home, name, err)
	}
	if _, err := c.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: home}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: create ClusterRoleBinding %s: %w", name, err)
	}
	return c.identity(ctx, home, name, rules)
}

// identity waits until the ServiceAccount namespace/name holds rules and
// returns a client with a token for it.
func (c *Cluster) identity(ctx context.Context, namespace, name string, rules []rbacv1.PolicyRule) (*Identity, error) {
	core := c.Clientset.CoreV1()
	username := "system:serviceaccount:" + namespace + ":" + name
	if err := c.WaitForRules(ctx, username, namespace, rules); err != nil {
		return nil, err
	}
	expiry := int64(24 * 60 * 60)
	tr, err := core.ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: token for %s/%s: %w", namespace, name, err)
	}
	id := &Identity{
		Namespace:      namespace,
		ServiceAccount: name,
		Username:       username,
		Host:           c.Host,
		CAPEM:          c.CAPEM,
		Token:          tr.Status.Token,
		KubeconfigPath: filepath.Join(c.Dir, "identities", namespace+"-"+name+".kubeconfig"),
		Config: &rest.Config{
			Host:            c.Host,
			BearerToken:     tr.Status.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM},
			QPS:             100,
			Burst:           200,
		},
	}
	if err := writeKubeconfig(id.KubeconfigPath, id.Host, id.CAPEM, nil, id.Token, namespace); err != nil {
		return nil, err
	}
	if id.Clientset, err = kubernetes.NewForConfig(id.Config); err != nil {
		return nil, err
	}
	return id, nil
}

// CreateNamespace creates a namespace named prefix-XXXXX and waits until
// its default ServiceAccount exists (the API server refuses Pods before).
func (c *Cluster) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	return c.createNamespace(ctx, prefix, "")
}

// createNamespace creates a namespace; placement, when set, pins its Pods
// to kwok or to the real node (PlacementAnnotations).
func (c *Cluster) createNamespace(ctx context.Context, prefix, placement string) (string, error) {
	prefix = strings.TrimSuffix(prefix, "-")
	if prefix == "" {
		prefix = "test"
	}
	meta := metav1.ObjectMeta{GenerateName: prefix + "-"}
	if placement != "" {
		meta.Annotations = PlacementAnnotations(placement)
	}
	ns, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	for {
		if _, err := c.Clientset.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return ns.Name, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("testenv/kubeenv: namespace %s has no default ServiceAccount: %w\n--- kube-controller-manager log ---\n%s",
				ns.Name, ctx.Err(), c.LogTail(BinControllerManager, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitForRules returns once the API server's authorizer grants user (in
// namespace) the first verb on the first resource of every rule. RBAC is
// served from informer caches, so a Role and RoleBinding that were just
// created can still be refused for a moment; callers that act as user right
// away wait here instead of racing the cache.
func (c *Cluster) WaitForRules(ctx context.Context, user, namespace string, rules []rbacv1.PolicyRule) error {
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0]}
		if len(r.APIGroups) > 0 {
			attrs.Group = r.APIGroups[0]
		}
		attrs.Resource, attrs.Subresource, _ = strings.Cut(r.Resources[0], "/")
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		for {
			sar, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("testenv/kubeenv: review %s for %s: %w", attrs.Verb, user, err)
			}
			if sar.Status.Allowed {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("testenv/kubeenv: %s still may not %s %s in %s: %w", user, attrs.Verb, r.Resources[0], namespace, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}
