# Quickstart on an SSH host: one embedded OpenClaw Agent run by systemd.
#
# The host needs systemd, sshd, OpenClaw at openclaw_path, a login that is
# root or has passwordless sudo, and the credentials file below, written by
# the operator (the provider never writes it): the model key
# (ANTHROPIC_API_KEY=…). The gateway's token is the agent's own: the first
# deploy makes it on the host, in a file only root reads. See the SSH guide.
terraform {
  required_providers {
    occ = {
      source  = "occ-platform/occ"
      version = "~> 0.1"
    }
  }
}

variable "host" {
  description = "The host's address."
  type        = string
}

variable "port" {
  description = "The host's SSH port."
  type        = number
  default     = 22
}

variable "host_key" {
  description = "The host's public key, as in /etc/ssh/ssh_host_ed25519_key.pub on the host. Always verified."
  type        = string
}

variable "ssh_user" {
  description = "The login: root, or a user with passwordless sudo."
  type        = string
  default     = "occ"
}

variable "private_key_file" {
  description = "The login's private key (without passphrase; with one, use agent = true)."
  type        = string
  default     = "~/.ssh/id_ed25519"
}

provider "occ" {
  ssh = {
    user        = var.ssh_user
    private_key = file(pathexpand(var.private_key_file))
  }
}

resource "occ_compute" "edge" {
  name = "edge"
  ssh = {
    host     = var.host
    port     = var.port
    host_key = var.host_key
  }
}

variable "model_base_url" {
  description = "An Anthropic-compatible endpoint (Messages API) for the model, e.g. http://llm.internal:8080; null (the default): Anthropic's own."
  type        = string
  default     = null
}

resource "occ_configuration" "assistant" {
  name     = "assistant"
  document = templatefile("${path.module}/openclaw.json5.tftpl", { model_base_url = var.model_base_url })
}

# The model credential stays on the host: systemd loads this file into the
# gateway's environment (EnvironmentFile=). Plan, state and logs never see it.
resource "occ_credential_source" "host" {
  name             = "host-credentials"
  compute          = occ_compute.edge
  method           = "runtime"
  environment_file = "/etc/occ/assistant.env"
}

resource "occ_agent" "assistant" {
  name          = "assistant"
  compute       = occ_compute.edge
  configuration = occ_configuration.assistant
  harness       = "openclaw" # explicit: with model_base_url, an own models.providers entry needs a runtime policy (MR5)
  harness_auth  = { source = occ_credential_source.host }
}

output "revision" {
  value = occ_agent.assistant.revision
}

output "status" {
  value = occ_agent.assistant.status
}

output "endpoint" {
  description = "The gateway on the host's loopback; reach it with ssh -L."
  value       = occ_agent.assistant.endpoint
}
