package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// RequiredRules is the minimal namespaced Role the provider needs in a
// tenant namespace; docs and examples render it from here.
var RequiredRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "create", "patch", "delete", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "create", "update", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "deletecollection"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "patch", "deletecollection"}},
}

// CheckPermissions asks the API server, with one SelfSubjectAccessReview per
// verb and resource, whether the provider's identity may do everything it
// will do in ns; the error lists every missing permission.
func (e *Executor) CheckPermissions(ctx context.Context, ns string) error {
	var missing []string
	for _, rule := range RequiredRules {
		for _, res := range rule.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, verb := range rule.Verbs {
				review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rule.APIGroups[0], Resource: resource, Subresource: sub},
				}}
				got, err := e.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("check permissions in namespace %s: %w", ns, err)
				}
				if !got.Status.Allowed {
					group := rule.APIGroups[0]
					if group == "" {
						group = "core"
					}
					missing = append(missing, fmt.Sprintf("%s %s (%s)", verb, res, group))
				}
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &MissingPermissions{Namespace: ns, Missing: missing}
	}
	return nil
}

// MissingPermissions lists what the provider's identity may not do.
type MissingPermissions struct {
	Namespace string
	Missing   []string
}

func (e *MissingPermissions) Error() string {
	return fmt.Sprintf("the provider's identity lacks %d permission(s) in namespace %s: %s", len(e.Missing), e.Namespace, strings.Join(e.Missing, "; "))
}

// EnsureNamespace creates ns when it is missing and reports whether it did.
func (e *Executor) EnsureNamespace(ctx context.Context, ns string) (bool, error) {
	_, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err):
		// A namespaced identity cannot read namespaces; its Role proves the
		// namespace exists, which CheckPermissions verifies next.
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	_, err = e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{render.LabelManagedBy: render.ManagedBy}}}, metav1.CreateOptions{FieldManager: render.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return true, nil
}

// DeleteNamespace removes a namespace the provider created.
func (e *Executor) DeleteNamespace(ctx context.Context, ns string) error {
	err := e.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}
