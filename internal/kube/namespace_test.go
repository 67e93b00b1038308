package kube

import (
	"os"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The documented Role is the one the provider checks for: they cannot drift.
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
	if !reflect.DeepEqual(role.Rules, RequiredRules) {
		t.Errorf("examples/kubernetes-role/role.yaml rules differ from kube.RequiredRules:\n%+v\n%+v", role.Rules, RequiredRules)
	}
}
