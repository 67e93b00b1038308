package kube

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The documented Role is the one the provider checks for, and what its
// plan preflight asks: they cannot drift.
func TestRequiredRulesMatchDocumentedRole(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes-role/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n---")
	var role rbacv1.Role
	if err := yaml.Unmarshal([]byte(first), &role); err != nil {
		t.Fatal(err)
	}
	want := append(append([]rbacv1.PolicyRule{}, RequiredRules...), PreflightRules...)
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("examples/kubernetes-role/role.yaml rules differ from kube.RequiredRules and PreflightRules:\n%+v\n%+v", role.Rules, want)
	}
}

// The documented ClusterRoles: occ-provider is RequiredRules,
// OccupantRules and PreflightRules (bound by the provider in the namespaces it creates),
// occ-provider-namespaces is NamespaceLifecycleRules, and the namespace
// policy holds the same identity its binding names.
func TestNamespaceLifecycleRulesMatchDocumentedClusterRole(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes-role/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---")
	if len(docs) != 3 {
		t.Fatalf("clusterrole.yaml has %d documents, want 3", len(docs))
	}
	for i, want := range []struct {
		name  string
		rules []rbacv1.PolicyRule
	}{
		{ProviderClusterRole, append(append(append([]rbacv1.PolicyRule{}, RequiredRules...), OccupantRules...), PreflightRules...)},
		{"occ-provider-namespaces", NamespaceLifecycleRules},
	} {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(docs[i]), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" || role.Name != want.name || !reflect.DeepEqual(role.Rules, want.rules) {
			t.Errorf("clusterrole.yaml document %d (%s %s) differs from %s:\n%+v\n%+v", i+1, role.Kind, role.Name, want.name, role.Rules, want.rules)
		}
	}
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.Unmarshal([]byte(docs[2]), &binding); err != nil {
		t.Fatal(err)
	}
	if binding.RoleRef.Name != "occ-provider-namespaces" || len(binding.Subjects) != 1 {
		t.Fatalf("clusterrole.yaml binds %+v to %+v", binding.RoleRef, binding.Subjects)
	}
	p, err := os.ReadFile("../../examples/kubernetes-role/namespace-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := binding.Subjects[0]
	user := "system:serviceaccount:" + s.Namespace + ":" + s.Name
	if SubjectOf(user) != s || !strings.Contains(string(p), `request.userInfo.username == "`+user+`"`) {
		t.Errorf("namespace-policy.yaml does not match the identity clusterrole.yaml binds, %s", user)
	}
}

// The provider binds its ClusterRole in a namespace it created to the
// identity the API server says it is.
func TestSubjectOf(t *testing.T) {
	for _, c := range []struct {
		user string
		want rbacv1.Subject
	}{
		{"system:serviceaccount:ci:terraform", rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ci", Name: "terraform"}},
		{"system:serviceaccount:ci", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:ci"}},
		{"system:serviceaccount::x", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "system:serviceaccount::x"}},
		{"alice@example.com", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice@example.com"}},
	} {
		if got := SubjectOf(c.user); got != c.want {
			t.Errorf("SubjectOf(%q) = %+v, want %+v", c.user, got, c.want)
		}
	}
}

// The documented preflight ClusterRole is what the preflight reads across
// the cluster, bound to the identity the other examples bind.
func TestPreflightClusterRulesMatchDocumentedClusterRole(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes-role/preflight-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---")
	if len(docs) != 2 {
		t.Fatalf("preflight-role.yaml has %d documents, want 2", len(docs))
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(docs[0]), &role); err != nil {
		t.Fatal(err)
	}
	if role.Kind != "ClusterRole" || role.Name != PreflightClusterRole || !reflect.DeepEqual(role.Rules, PreflightClusterRules) {
		t.Errorf("preflight-role.yaml's ClusterRole (%s %s) differs from PreflightClusterRules:\n%+v\n%+v", role.Kind, role.Name, role.Rules, PreflightClusterRules)
	}
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.Unmarshal([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ci", Name: "terraform"}
	if binding.RoleRef.Name != PreflightClusterRole || len(binding.Subjects) != 1 || binding.Subjects[0] != want {
		t.Errorf("preflight-role.yaml binds %+v to %+v", binding.RoleRef, binding.Subjects)
	}
}

// The documented sandbox Roles are the ones the provider checks for.
func TestSandboxRulesMatchDocumentedRoles(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes-role/sandbox-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---")
	if len(docs) != 2 {
		t.Fatalf("sandbox-role.yaml has %d documents, want 2", len(docs))
	}
	for i, want := range [][]rbacv1.PolicyRule{SandboxRules, DriverGatewayRules} {
		var role rbacv1.Role
		if err := yaml.Unmarshal([]byte(docs[i]), &role); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(role.Rules, want) {
			t.Errorf("sandbox-role.yaml document %d rules differ:\n%+v\n%+v", i+1, role.Rules, want)
		}
	}
}

// The documented turn Role is the one the turn's port-forward needs.
func TestTurnRulesMatchDocumentedRole(t *testing.T) {
	b, err := os.ReadFile("../../examples/kubernetes-role/turn-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(role.Rules, TurnRules) {
		t.Errorf("examples/kubernetes-role/turn-role.yaml rules differ from kube.TurnRules:\n%+v\n%+v", role.Rules, TurnRules)
	}
}

// A Service the sandbox driver gives a Sandbox goes with the Sandbox: it
// does not keep a compute's namespace; anything else does.
func TestSandboxOwned(t *testing.T) {
	yes := true
	for _, c := range []struct {
		refs []metav1.OwnerReference
		want bool
	}{
		{[]metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "a-harness-r1", Controller: &yes}}, true},
		{[]metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "a-harness-r1"}}, false},
		{[]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Sandbox", Name: "x", Controller: &yes}}, false},
		{[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x", Controller: &yes}}, false},
		{nil, false},
	} {
		if got := sandboxOwned(c.refs); got != c.want {
			t.Errorf("sandboxOwned(%+v) = %v, want %v", c.refs, got, c.want)
		}
	}
}

// rule issue 31: the preflight asks only what its documented rules grant;
// a read outside them is refused before any request.
func TestMayPreflight_OnlyTheDocumentedReads(t *testing.T) {
	e := &Executor{} // no client: a request would panic
	for _, c := range []struct{ ns, group, resource, verb string }{
		{"occ-acme", "", "secrets", "list"},
		{"occ-acme", "", "nodes", "list"},
		{"", "", "pods", "create"},
		{"", "storage.k8s.io", "storageclasses", "create"},
	} {
		if _, err := e.mayPreflight(context.Background(), c.ns, c.group, c.resource, c.verb); err == nil || !strings.Contains(err.Error(), "outside its documented rules") {
			t.Errorf("mayPreflight(%+v) = %v, want a refusal", c, err)
		}
	}
	for _, r := range PreflightRules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if !rulesGrant(PreflightRules, r.APIGroups[0], res, v) {
					t.Errorf("rulesGrant misses %s %s", v, res)
				}
			}
		}
	}
}
