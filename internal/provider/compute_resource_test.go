package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHPvWGJQ0YPgQdiedKaM18KfSQNuvDhlMYl5yykHBSiY test-host"

func TestAccCompute_KubernetesLifecycle(t *testing.T) {
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: testComputeK8s,
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
				// Update in place: a qualifying driver makes dedicated OpenClaw available (ND5, ND6).
				Config: `
resource "occ_compute" "k" {
  name = "prod"
  kubernetes = {
    namespace      = "occ-acme"
    cpu_limit      = "3500m"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "gpu-a" }
  }
}`,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_compute.k", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("native_workers_support"), knownvalue.StringExact("pinned-runtime")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("installation").AtMapKey("execution_modes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("embedded"), knownvalue.StringExact("dedicated")})),
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

func TestAccCompute_SSH(t *testing.T) {
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
				Config: testComputeK8s + `
resource "occ_compute" "h" {
  name       = "edge"
  kubernetes = { namespace = "edge" }
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
		"both kinds": {`resource "occ_compute" "h" {
  name       = "edge"
  ssh        = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
  kubernetes = { namespace = "x" }
}`, `(?i)invalid attribute combination`},
		"bad quantity": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", cpu_limit = "two" }
}`, `INVALID_REQUEST: not a valid quantity[\s\S]*kubernetes.cpu_limit`},
		"bad facet": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", sandbox_driver = { name = "openshell", facets = ["gpu"] } }
}`, `(?i)facets`},
		"native support on pinned image": {`resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ", native_worker_support = true }
}`, `INVALID_REQUEST: native_worker_support is only for a custom runtime_image`},
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
