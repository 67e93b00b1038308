# Dedicated Codex contained by the OpenShell sandbox driver, with the model key
# supplied by the Credential Gateway: the harness sees only a placeholder.
terraform {
  required_providers {
    occ = { source = "occ-platform/occ", version = "~> 0.1" }
  }
}

provider "occ" {
  kubernetes = { config_path = "~/.kube/config" }
}

resource "occ_compute" "sandboxed" {
  name = "sandboxed"
  kubernetes = {
    namespace = "occ-acme"
    sandbox_driver = {
      name              = "openshell"
      facets            = ["networking", "filesystem", "process"]
      required_profile  = "standard"
      gateway_namespace = "openshell" # the OpenShell Helm release's namespace
    }
    credential_gateway = { name = "cg-main" }
  }
}

data "occ_installation" "sandboxed" {
  compute = occ_compute.sandboxed
}

resource "occ_configuration" "coder" {
  name     = "coder"
  document = jsonencode({ agents = { defaults = { model = "codex/gpt-5-codex" } } })
}

# No value: the Credential Gateway holds the key and attaches it to the
# revision's Sandbox; the revision activates only once it is attached.
resource "occ_credential_source" "openai" {
  name        = "openai"
  method      = "credential_source"
  source_type = "openai_api_key"
}

resource "occ_agent" "coder" {
  name           = "coder"
  compute        = occ_compute.sandboxed
  configuration  = occ_configuration.coder
  harness        = "codex"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.openai }
}

output "driver_unavailable" {
  value = data.occ_installation.sandboxed.sandbox_driver_unavailable
}
