package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccInstallation_Capabilities: the data source reports what an Agent can
// use on a compute (rules ND5, ND6).
func TestAccInstallation_Capabilities(t *testing.T) {
	modes := func(ms ...string) knownvalue.Check {
		checks := make([]knownvalue.Check, len(ms))
		for i, m := range ms {
			checks[i] = knownvalue.StringExact(m)
		}
		return knownvalue.ListExact(checks)
	}
	env := newAdminEnv(t)
	ns := env.cluster.TestNamespace(t)
	env.ns = ns
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: strings.ReplaceAll(env.provider+env.compute("")+`
resource "occ_compute" "sandboxed" {
  name = "sandboxed"
  kubernetes = {
    namespace      = "NS"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "p", gateway_namespace = "NS" }
  }
}
resource "occ_compute" "custom" {
  name = "custom"
  kubernetes = {
    namespace      = "NS"
    runtime_image  = "registry.example/openclaw:custom"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "p", gateway_namespace = "NS" }
  }
}
resource "occ_compute" "declared" {
  name = "declared"
  kubernetes = {
    namespace             = "NS"
    runtime_image         = "registry.example/openclaw:custom"
    native_worker_support = true
    sandbox_driver        = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "p", gateway_namespace = "NS" }
  }
}
resource "occ_compute" "partial" {
  name = "partial"
  kubernetes = {
    namespace      = "NS"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem"], required_profile = "p", gateway_namespace = "NS" }
  }
}
data "occ_installation" "plain" { compute = occ_compute.k }
data "occ_installation" "sandboxed" { compute = occ_compute.sandboxed }
data "occ_installation" "custom" { compute = occ_compute.custom }
data "occ_installation" "declared" { compute = occ_compute.declared }
data "occ_installation" "partial" { compute = occ_compute.partial }
`, "NS", ns),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("execution_modes"), modes("embedded")),
				statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(false)),
				// The declared driver's gateway does not exist in the cluster
				// (ND5); no compute offers dedicated OpenClaw anyway (ND6).
				statecheck.ExpectKnownValue("data.occ_installation.sandboxed", tfjsonpath.New("execution_modes"), modes("embedded")),
				statecheck.ExpectKnownValue("data.occ_installation.sandboxed", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.occ_installation.sandboxed", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue("data.occ_installation.custom", tfjsonpath.New("execution_modes"), modes("embedded")),
				statecheck.ExpectKnownValue("data.occ_installation.custom", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
				// The deprecated declaration admits nothing (ND6).
				statecheck.ExpectKnownValue("data.occ_installation.declared", tfjsonpath.New("execution_modes"), modes("embedded")),
				statecheck.ExpectKnownValue("data.occ_installation.declared", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.occ_installation.partial", tfjsonpath.New("execution_modes"), modes("embedded")),
			},
		}},
	})
}
