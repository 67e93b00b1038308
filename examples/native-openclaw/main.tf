# Experimental: dedicated native OpenClaw. The Agent's gateway runs as its own
# Deployment; the node host (inference and tools, node_workers session-owned
# workers) runs in the revision's OpenShell Sandbox and enrolls through the
# gateway with a one-use target only it can read.
terraform {
  required_providers {
    occ = { source = "occ-platform/occ", version = "~> 0.1" }
  }
}

provider "occ" {
  kubernetes = { config_path = "~/.kube/config" }
}

variable "openai_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "occ_compute" "native" {
  name = "native"
  kubernetes = {
    namespace    = "occ-native"
    node_workers = 8
    sandbox_driver = {
      name             = "openshell"
      facets           = ["networking", "filesystem", "process"]
      required_profile = "gpu-a"
    }
  }
}

resource "occ_configuration" "native" {
  name     = "native"
  document = jsonencode({ agents = { defaults = { model = "openai/gpt-5" } } })
}

# The key reaches only the node host's environment (node-local inference);
# the gateway never receives it.
resource "occ_credential_source" "openai" {
  name             = "openai"
  compute          = occ_compute.native
  method           = "api_key"
  value_wo         = var.openai_api_key
  value_wo_version = 1
}

resource "occ_agent" "native" {
  name           = "native"
  compute        = occ_compute.native
  configuration  = occ_configuration.native
  harness        = "openclaw"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.openai }
}
