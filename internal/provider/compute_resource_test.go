package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHPvWGJQ0YPgQdiedKaM18KfSQNuvDhlMYl5yykHBSiY test-host"

// TestAccCompute_KubernetesLifecycle: create checks the cluster and creates
// the missing tenant namespace; destroy deletes the namespace it created;
// a declared driver the cluster does not serve offers no native workers
// (rule ND5).
func TestAccCompute_KubernetesLifecycle(t *testing.T) {
	env := newAdminEnv(t)
	ns := env.freshNamespace(t)
	compute := func(extra string) string {
		return env.provider + fmt.Sprintf(`
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = {
    namespace = %q
    %s
  }
}`, ns, extra)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			// Created by the compute, holding only what the provider wrote: gone.
			_, err := env.cluster.Clientset.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s after destroy: err = %v, want NotFound", ns, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: compute(""),
				Check: func(*terraform.State) error {
					got, err := env.cluster.Clientset.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
					if err != nil {
						return fmt.Errorf("the compute did not create namespace %s: %v", ns, err)
					}
					if got.Labels[render.LabelManagedBy] != render.ManagedBy {
						return fmt.Errorf("namespace labels = %v", got.Labels)
					}
					return nil
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("id"), knownvalue.StringExact("prod")),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kind"), knownvalue.StringExact("kubernetes")),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kubernetes").AtMapKey("cpu_limit"), knownvalue.StringExact("2")),
					// rule ND5: no sandbox driver, so only embedded and no native workers.
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("execution_modes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("embedded")})),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("native_workers_support"), knownvalue.Null()),
				},
			},
			{
				// Update in place: a driver whose gateway does not exist in the
				// cluster is read live as not installed (ND5).
				Config: compute(`cpu_limit = "3500m"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "gpu-a", gateway_namespace = "no-such-openshell" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_compute.k", plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue("occ_compute.k", tfjsonpath.New("installation")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("execution_modes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("embedded")})),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("native_workers_support"), knownvalue.Null()),
				},
			},
			{
				ResourceName:  "occ_compute.k",
				ImportState:   true,
				ImportStateId: "prod",
				ImportStateCheck: func(s []*terraform.InstanceState) error {
					return expectAttrs(s, map[string]string{"id": "prod", "name": "prod"})
				},
			},
		},
	})
}

// TestAccCompute_ExistingNamespaceAndPermissions: a compute on a namespace it
// did not create leaves it on destroy; an identity without the documented
// Role is refused at create with every missing permission listed.
func TestAccCompute_ExistingNamespaceAndPermissions(t *testing.T) {
	env := newKubeEnv(t)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := env.cluster.Clientset.CoreV1().Namespaces().Get(context.Background(), env.ns, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("destroy removed a namespace the compute did not create: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{Config: env.provider + env.compute("")}},
	})

	ns := env.cluster.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readOnly, err := env.cluster.NamespacedIdentity(ctx, ns, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"get", "list", "watch"}}})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = %q }
}`, readOnly.KubeconfigPath, ns),
			ExpectError: mustRegexp(`RESOURCE_CONFLICT: missing permissions in namespace ` + ns + `[\s\S]*create deployments \(apps\)[\s\S]*create secrets \(core\)`),
		}},
	})
}

func TestAccCompute_SSH(t *testing.T) {
	env := newAdminEnv(t)
	ns := env.freshNamespace(t)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: `
resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_compute.h", tfjsonpath.New("kind"), knownvalue.StringExact("ssh")),
					statecheck.ExpectKnownValue("occ_compute.h", tfjsonpath.New("ssh").AtMapKey("port"), knownvalue.Int64Exact(22)),
					statecheck.ExpectKnownValue("occ_compute.h", tfjsonpath.New("installation").AtMapKey("execution_modes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("embedded")})),
				},
			},
			{
				// A compute cannot change kind in place.
				Config: env.provider + `
resource "occ_compute" "h" {
  name       = "edge"
  kubernetes = { namespace = "` + ns + `" }
}`,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_compute.h", plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}

func TestAccCompute_ValidationErrors(t *testing.T) {
	cases := map[string]struct {
		config string
		err    string
	}{
		"ssh without host key": {`resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5" }
}`, `INVALID_REQUEST: the SSH host key is missing[\s\S]*ssh.host_key`},
		"bad host key": {`resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "not-a-key" }
}`, `INVALID_REQUEST: not a host key`},
		// Issue 27: a known_hosts line marked @revoked names a key that
		// must never be accepted.
		"revoked host key": {`resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "@revoked 10.0.0.5 ` + testHostKey + `" }
}`, `INVALID_REQUEST: not a host key[\s\S]*marked @revoked`},
		"both kinds": {`resource "occ_compute" "h" {
  name       = "edge"
  ssh        = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
  kubernetes = { namespace = "x" }
}`, `INVALID_REQUEST: a compute is either kubernetes or ssh, not both`},
		"neither kind": {`resource "occ_compute" "h" {
  name = "edge"
}`, `INVALID_REQUEST: a compute needs kubernetes or ssh`},
		"bad quantity": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", cpu_limit = "two" }
}`, `INVALID_REQUEST: not a valid quantity[\s\S]*kubernetes.cpu_limit`},
		// rule ND7: the facets are networking, filesystem and process;
		// there is no command-level exec facet.
		"bad facet": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", sandbox_driver = { name = "openshell", facets = ["gpu"] } }
}`, `INVALID_REQUEST: unsupported value "gpu"[\s\S]*"networking", "filesystem", "process"[\s\S]*rule ND7`},
		"native support on pinned image": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", native_worker_support = true }
}`, `INVALID_REQUEST: native_worker_support is only for a custom runtime_image`},
		"image not a reference": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", codex_image = "registry.example/Codex:1" }
}`, `INVALID_REQUEST: not an image reference[\s\S]*kubernetes.codex_image[\s\S]*pin the image by digest`},
		"image with a short digest": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", runtime_image = "registry.example/rt:1@sha256:abc" }
}`, `INVALID_REQUEST: not an image reference[\s\S]*kubernetes.runtime_image`},
		"namespace not a DNS label": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "Not_A_Label" }
}`, `INVALID_REQUEST: not a DNS label`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: tc.config, ExpectError: mustRegexp(tc.err)}},
			})
		})
	}
}

// TestAccPlan_ClusterUnreachable: a plan of new resources never needs the
// cluster or the host.
func TestAccPlan_ClusterUnreachable(t *testing.T) {
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `
provider "occ" {
  kubernetes = { host = "https://127.0.0.1:1", token = "unused" }
}` + testComputeK8s + testConfigAnthropic + testSourceSecretRef + `
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}`,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// TestAccCompute_NamespaceOwnership: destroy deletes the namespace the
// provider created for the compute only when nothing is left in it: the
// objects of another configuration's Agents keep it. A namespace an apply
// re-created for the compute after someone deleted it is the compute's to
// delete too.
func TestAccCompute_NamespaceOwnership(t *testing.T) {
	env := newAdminEnv(t)
	cs := env.cluster.Clientset.CoreV1()
	ctx := context.Background()

	kept := env.freshNamespace(t)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			got, err := cs.Namespaces().Get(ctx, kept, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				return fmt.Errorf("namespace %s holding another configuration's agent was deleted: %v", kept, err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: env.provider + fmt.Sprintf(`
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = %q }
}`, kept),
			Check: func(*terraform.State) error {
				// What an Agent of another Terraform configuration leaves in
				// the same namespace: the provider's labels, another agent.
				_, err := cs.ConfigMaps(kept).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-r1",
					Labels: map[string]string{render.LabelManagedBy: render.ManagedBy, render.LabelAgent: "other"}}}, metav1.CreateOptions{})
				return err
			},
		}},
	})

	ns := env.freshNamespace(t)
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := func(source string) string {
		return env.provider + fmt.Sprintf(`
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = %q }
}`, ns) + source
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := cs.Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s re-created for the compute, after destroy: err = %v, want NotFound", ns, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config("")},
			{
				PreConfig: func() {
					if err := cs.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
						if _, err := cs.Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
							return
						}
						if time.Now().After(deadline) {
							t.Fatalf("namespace %s still there a minute after its delete", ns)
						}
					}
				},
				Config: config(`
resource "occ_credential_source" "s" {
  name             = "openai"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = "sk-test"
  value_wo_version = 1
}`),
				Check: func(*terraform.State) error {
					got, err := cs.Namespaces().Get(ctx, ns, metav1.GetOptions{})
					if err != nil {
						return fmt.Errorf("the credential source did not re-create namespace %s: %v", ns, err)
					}
					if got.Annotations[render.AnnotationCompute] != "prod" || got.Labels[render.LabelManagedBy] != render.ManagedBy {
						return fmt.Errorf("re-created namespace: labels %v, annotations %v", got.Labels, got.Annotations)
					}
					return nil
				},
			},
		},
	})
}
