# Quickstart: one embedded OpenClaw Agent on a Kubernetes namespace.
terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

provider "occ" {}

resource "occ_compute" "local" {
  name = "local"
  kubernetes = {
    namespace = "occ-quickstart"
    cpu_limit = "1"
  }
}

resource "occ_configuration" "assistant" {
  name     = "assistant"
  document = file("${path.module}/openclaw.json5")
}

variable "openai_api_key" {
  description = "The OpenAI key; write-only, it reaches only a Kubernetes Secret."
  type        = string
  sensitive   = true
  ephemeral   = true
}

resource "occ_credential_source" "openai" {
  name             = "openai"
  compute          = occ_compute.local
  method           = "api_key"
  value_wo         = var.openai_api_key
  value_wo_version = 1
}

resource "occ_agent" "assistant" {
  name          = "assistant"
  compute       = occ_compute.local
  configuration = occ_configuration.assistant
  harness       = "openclaw" # openai models need an explicit runtime policy (MR5)
  harness_auth  = { source = occ_credential_source.openai }
}

output "revision" {
  value = occ_agent.assistant.revision
}

output "endpoint" {
  value = occ_agent.assistant.endpoint
}

output "admitted_document" {
  value = jsondecode(occ_agent.assistant.admitted_document)
}
