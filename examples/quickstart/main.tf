# Quickstart: one embedded OpenClaw Agent on a Kubernetes namespace.
terraform {
  required_providers {
    occ = {
      source  = "occ-platform/occ"
      version = "~> 0.1"
    }
  }
}

variable "kube_context" {
  description = "The kubeconfig context to deploy to; null (the default): the current context of KUBE_CONFIG_PATH, KUBECONFIG or ~/.kube/config."
  type        = string
  default     = null
}

provider "occ" {
  kubernetes = { config_context = var.kube_context }
}

resource "occ_compute" "local" {
  name = "local"
  kubernetes = {
    namespace = "occ-quickstart"
    cpu_limit = "1"
  }
}

variable "model_base_url" {
  description = "An OpenAI-compatible endpoint (Responses API) for the openai models, e.g. http://llm.internal:8080/v1; null (the default): OpenAI's own. A literal URL: the startup probe calls it as written (rule PR11)."
  type        = string
  default     = null
}

resource "occ_configuration" "assistant" {
  name     = "assistant"
  document = templatefile("${path.module}/openclaw.json5.tftpl", { model_base_url = var.model_base_url })
}

variable "openai_api_key" {
  description = "The key for the openai models (OpenAI's, or the one model_base_url takes); write-only, it reaches only a Kubernetes Secret."
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

output "status" {
  value = occ_agent.assistant.status
}

output "endpoint" {
  value = occ_agent.assistant.endpoint
}

output "admitted_document" {
  value = jsondecode(occ_agent.assistant.admitted_document)
}
