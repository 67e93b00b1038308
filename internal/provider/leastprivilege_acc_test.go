package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// documentedRoles installs, as the cluster's administrator, exactly what
// examples/kubernetes-role/clusterrole.yaml and namespace-policy.yaml
// document: the two ClusterRoles (as they are), the small one bound to a
// new ServiceAccount, and the namespace policy with that ServiceAccount's
// user name in its match condition (under a name of its own, so that tests
// of other identities are not matched). It returns the identity, once the
// policy is in force.
func documentedRoles(t *testing.T, c *kubeenv.Cluster) *kubeenv.Identity {
	t.Helper()
	ctx := context.Background()
	rbac := c.Clientset.RbacV1()
	b, err := os.ReadFile("../../examples/kubernetes-role/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---")
	for _, d := range docs[:2] {
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(d), &role); err != nil {
			t.Fatal(err)
		}
		// The same documented ClusterRoles for every test of this run:
		// created once, or brought back to the documented rules.
		got, err := rbac.ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = rbac.ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		case err == nil:
			got.Rules = role.Rules
			_, err = rbac.ClusterRoles().Update(ctx, got, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	id, err := c.BoundIdentity(ctx, c.TestNamespace(t), "occ-provider-namespaces", kube.NamespaceLifecycleRules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), id.ServiceAccount, metav1.DeleteOptions{})
	})

	p, err := os.ReadFile("../../examples/kubernetes-role/namespace-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(p), `"system:serviceaccount:ci:terraform"`, fmt.Sprintf("%q", id.Username), 1)
	pdocs := strings.Split(text, "\n---")
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(pdocs[0]), &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(pdocs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	policy.Name += "-" + id.ServiceAccount
	binding.Name, binding.Spec.PolicyName = policy.Name, policy.Name
	adm := c.Clientset.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// The policy is in force once a dry-run delete of a namespace the
	// provider did not create is refused by it (a dry run writes nothing,
	// so the wait cannot delete it).
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	neighbour := c.TestNamespace(t)
	var last error
	if err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = id.Clientset.CoreV1().Namespaces().Delete(ctx, neighbour, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "the provider deletes only namespaces it created"), nil
	}); err != nil {
		t.Fatalf("the namespace policy is not in force after 60 s: dry-run delete of %s: %v", neighbour, last)
	}
	return id
}

// confined checks, with SelfSubjectAccessReviews as the identity, that it
// may read no Secret and write no workload in namespaces other than the
// compute's, and, with dry-run requests the namespace policy refuses, that
// it can neither bind itself there nor delete them. In its own namespace it
// holds what the provider needs (kube.RequiredRules).
func confined(ctx context.Context, id *kubeenv.Identity, own string, others ...string) error {
	may := func(ns, verb, group, resource string) (bool, error) {
		res, sub, _ := strings.Cut(resource, "/")
		r, err := id.Clientset.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res, Subresource: sub}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}
	forbidden := []struct{ verb, group, resource string }{
		{"get", "", "secrets"}, {"list", "", "secrets"}, {"watch", "", "secrets"},
		{"get", "", "configmaps"}, {"create", "", "pods"}, {"create", "", "pods/exec"},
		{"create", "apps", "deployments"}, {"patch", "apps", "deployments"}, {"delete", "apps", "deployments"},
		{"create", "apps", "statefulsets"}, {"create", "apps", "daemonsets"}, {"create", "batch", "jobs"},
		{"create", "", "serviceaccounts/token"}, {"create", "", "secrets"}, {"patch", "", "services"},
		{"create", "rbac.authorization.k8s.io", "roles"}, {"escalate", "rbac.authorization.k8s.io", "clusterroles"},
	}
	for _, ns := range others {
		for _, f := range forbidden {
			ok, err := may(ns, f.verb, f.group, f.resource)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("the documented roles let the provider %s %s in namespace %s", f.verb, f.resource, ns)
			}
		}
		// The two cluster-wide verbs, held to the computes' namespaces by
		// the namespace policy: refused even as dry runs.
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "occ-provider-escalation"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kube.ProviderClusterRole},
			Subjects:   []rbacv1.Subject{kube.SubjectOf(id.Username)},
		}
		_, err := id.Clientset.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "only in a namespace it created") {
			return fmt.Errorf("binding %s in namespace %s: %v, want the namespace policy's refusal", kube.ProviderClusterRole, ns, err)
		}
		// (kube-system and default the API server itself keeps.)
		err = id.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "only namespaces it created") && !strings.Contains(err.Error(), "this namespace may not be deleted") {
			return fmt.Errorf("deleting namespace %s: %v, want the namespace policy's refusal", ns, err)
		}
	}
	for _, r := range kube.RequiredRules {
		for _, res := range r.Resources {
			ok, err := may(own, r.Verbs[0], r.APIGroups[0], res)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("in its compute's namespace %s the provider may not %s %s", own, r.Verbs[0], res)
			}
		}
	}
	return nil
}

// documentedRolesConfig is what the documented-roles tests apply: the
// compute (which creates env.ns), a write-only key source, configuration
// "support" with model, and, unless agent is "", an agent of that name.
func documentedRolesConfig(env kubeEnv, model, agent string) string {
	config := env.provider + env.compute("") + writeOnlyKeySource("anthropic") + fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode({ agents = { defaults = { model = %q } } })
}
`, model)
	if agent == "" {
		return config
	}
	return config + fmt.Sprintf(`
resource "occ_agent" "a" {
  name          = %q
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "90s", update = "90s", delete = "60s" }
}`, agent)
}

// TestAccCompute_LeastPrivilege (issue 27): under exactly the documented
// ClusterRoles and namespace policy (examples/kubernetes-role), a compute
// creates its namespace and binds occ-provider in it, an agent is created,
// updated to a new revision, refreshed, imported and destroyed, and the
// compute's destroy deletes the namespace; a namespace that still holds
// another configuration's Secret is kept. Throughout, SelfSubjectAccess
// Reviews show that the identity may not read a Secret or write a workload
// in kube-system, default or a neighbour's namespace, and the namespace
// policy refuses it a binding there or a namespace delete.
func TestAccCompute_LeastPrivilege(t *testing.T) {
	c := kubeenv.Shared(t)
	ctx := context.Background()
	id := documentedRoles(t, c)
	neighbour := c.TestNamespace(t)
	env := kubeEnv{cluster: c, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, id.KubeconfigPath)}
	cs := c.Clientset
	t.Setenv("TF_VAR_key", testSentinel) // the write-only key, as CI would pass it
	config := func(model string) string { return documentedRolesConfig(env, model, "support") }
	for _, keep := range []bool{false, true} {
		ns := env.freshNamespace(t)
		env.ns = ns
		// The binding the compute wrote: the provider's ClusterRole, to the
		// identity the API server knows it as, in its own namespace only.
		bound := func(*terraform.State) error {
			got, err := cs.RbacV1().RoleBindings(ns).Get(ctx, kube.NamespaceRoleBinding, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("the compute's namespace has no RoleBinding %s: %w", kube.NamespaceRoleBinding, err)
			}
			want := kube.SubjectOf(id.Username)
			if got.RoleRef.Name != kube.ProviderClusterRole || len(got.Subjects) != 1 || got.Subjects[0] != want ||
				got.Labels[render.LabelManagedBy] != render.ManagedBy {
				return fmt.Errorf("RoleBinding %s/%s binds %+v to %+v", ns, got.Name, got.RoleRef, got.Subjects)
			}
			return confined(ctx, id, ns, "kube-system", "default", neighbour)
		}
		steps := []resource.TestStep{{
			Config: config("anthropic/claude-sonnet-4-5"),
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
				resource.TestCheckResourceAttr("occ_agent.a", "revision", "1"),
				bound),
		}}
		if !keep {
			steps = append(steps,
				resource.TestStep{
					// update: a new revision, deployed and activated
					Config: config("anthropic/claude-opus-4-1"),
					Check: resource.ComposeTestCheckFunc(
						resource.TestCheckResourceAttr("occ_agent.a", "status", "active"),
						resource.TestCheckResourceAttr("occ_agent.a", "revision", "2")),
				},
				resource.TestStep{RefreshState: true},
				resource.TestStep{
					Config: config("anthropic/claude-opus-4-1"), ResourceName: "occ_agent.a",
					ImportState: true, ImportStateId: ns + "/support",
					ImportStateCheck: func(s []*terraform.InstanceState) error {
						if len(s) != 1 || s[0].Attributes["status"] != "active" || s[0].Attributes["revision"] != "2" {
							return fmt.Errorf("imported agent: %+v", s)
						}
						return nil
					},
				},
				resource.TestStep{Config: config("anthropic/claude-opus-4-1"), PlanOnly: true},
			)
		} else {
			steps[0].Check = resource.ComposeTestCheckFunc(steps[0].Check, func(*terraform.State) error {
				_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}, metav1.CreateOptions{})
				return err
			})
		}
		resource.Test(t, resource.TestCase{
			PreCheck:                 func() { testAccPreCheck(t) },
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			CheckDestroy: func(*terraform.State) error {
				got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				switch {
				case keep && (err != nil || got.DeletionTimestamp != nil):
					return fmt.Errorf("namespace %s holding another configuration's Secret was deleted: %v", ns, err)
				case !keep && err == nil:
					return fmt.Errorf("namespace %s the compute created was kept", ns)
				}
				return nil
			},
			Steps: steps,
		})
	}
}
