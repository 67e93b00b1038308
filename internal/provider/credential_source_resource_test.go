package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const testSentinel = "sk-SENTINEL-9f3c2a7e-do-not-leak"

func TestAccCredentialSource_Methods(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "codex-token", "token", "codex-access-token")
	env.secret(t, "codex-token-2", "token", "codex-access-token-2")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: env.provider + env.compute("") + `
resource "occ_credential_source" "pat" {
  name       = "codex-pat"
  compute    = occ_compute.k
  method     = "codex_pat"
  secret_ref = { name = "codex-token", key = "token" }
}
resource "occ_credential_source" "gw" {
  name        = "gw"
  method      = "credential_source"
  source_type = "openai_api_key"
}
resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
}
resource "occ_credential_source" "rt" {
  name             = "host-env"
  compute          = occ_compute.h
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_credential_source.pat", tfjsonpath.New("secret_name"), knownvalue.StringExact("codex-token")),
					statecheck.ExpectKnownValue("occ_credential_source.gw", tfjsonpath.New("generation"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("occ_credential_source.rt", tfjsonpath.New("environment_file"), knownvalue.StringExact("/etc/occ/openclaw.env")),
				},
			},
			{
				// Changing the reference is a new generation.
				Config: env.provider + env.compute("") + `
resource "occ_credential_source" "pat" {
  name       = "codex-pat"
  compute    = occ_compute.k
  method     = "codex_pat"
  secret_ref = { name = "codex-token-2", key = "token" }
}
resource "occ_credential_source" "gw" {
  name        = "gw"
  method      = "credential_source"
  source_type = "openai_api_key"
}
resource "occ_compute" "h" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
}
resource "occ_credential_source" "rt" {
  name             = "host-env"
  compute          = occ_compute.h
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_credential_source.pat", tfjsonpath.New("generation"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("occ_credential_source.gw", tfjsonpath.New("generation"), knownvalue.Int64Exact(1)),
				},
			},
		},
	})
}

func TestAccCredentialSource_ValidationErrors(t *testing.T) {
	cases := map[string]struct{ config, err string }{
		"api_key without value": {testComputeK8s + `
resource "occ_credential_source" "s" {
  name    = "x"
  compute = occ_compute.k
  method  = "api_key"
}`, `INVALID_REQUEST: method "api_key" needs exactly one of value_wo or secret_ref`},
		"value without version": {testComputeK8s + `
resource "occ_credential_source" "s" {
  name     = "x"
  compute  = occ_compute.k
  method   = "api_key"
  value_wo = "k"
}`, `INVALID_REQUEST: value_wo and value_wo_version go together`},
		"attribute of another method": {`
resource "occ_credential_source" "s" {
  name             = "x"
  method           = "credential_source"
  source_type      = "openai_api_key"
  environment_file = "/etc/x.env"
}`, `INVALID_REQUEST: environment_file does not apply to method "credential_source"`},
		"secret source without compute": {`
resource "occ_credential_source" "s" {
  name       = "x"
  method     = "api_key"
  secret_ref = { name = "a", key = "b" }
}`, `INVALID_REQUEST: a api_key source needs its compute`},
		"AU5 runtime on kubernetes": {testComputeK8s + `
resource "occ_credential_source" "s" {
  name             = "x"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = "/etc/x.env"
}`, `RESOURCE_CONFLICT: Kubernetes rejects the runtime method[\s\S]*AU5`},
		// rules AU5, SS2: kept on purpose; the detail says why and what to write.
		"AU5 runtime without environment_file": {`
resource "occ_credential_source" "s" {
  name   = "x"
  method = "runtime"
}`, `INVALID_REQUEST: method "runtime" needs environment_file[\s\S]*only the gateway's readiness`},
		// rule AU2, issue 26: a ServiceAccount's Kubernetes token is not a
		// Codex access token; such a source could never log in.
		"AU2 codex_pat from a service account": {testComputeK8s + `
resource "occ_credential_source" "s" {
  name            = "x"
  compute         = occ_compute.k
  method          = "codex_pat"
  service_account = "codex-account"
}`, `INVALID_REQUEST: a codex_pat source from service account "codex-account" cannot log in[\s\S]*secret_ref[\s\S]*AU2`},
		"relative environment file": {`
resource "occ_credential_source" "s" {
  name             = "x"
  method           = "runtime"
  environment_file = "etc/x.env"
}`, `INVALID_REQUEST: not an absolute path`},
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
