resource "occ_compute" "prod" {
  name       = "prod"
  kubernetes = { namespace = "occ-acme" }
}

variable "openai_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

# A key the provider writes into a Secret. value_wo is write-only: it never
# reaches state or plan. Bump value_wo_version to rotate.
resource "occ_credential_source" "openai" {
  name             = "openai"
  compute          = occ_compute.prod
  method           = "api_key"
  value_wo         = var.openai_api_key
  value_wo_version = 1
}

# An existing Secret.
resource "occ_credential_source" "anthropic" {
  name       = "anthropic"
  compute    = occ_compute.prod
  method     = "api_key"
  secret_ref = { name = "anthropic", key = "api-key" }
}

# A Codex access token in a Secret of the namespace (dedicated Codex only).
resource "occ_credential_source" "codex" {
  name       = "codex"
  compute    = occ_compute.prod
  method     = "codex_pat"
  secret_ref = { name = "codex-token", key = "token" }
}

# A key from the Credential Gateway: the harness sees only a placeholder.
resource "occ_credential_source" "gateway" {
  name        = "gateway-openai"
  method      = "credential_source"
  source_type = "openai_api_key"
}

# Operator-provided host credentials on an SSH compute, loaded by systemd.
resource "occ_credential_source" "host" {
  name             = "host-env"
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}
