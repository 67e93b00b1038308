resource "occ_compute" "prod" {
  name       = "prod"
  kubernetes = { namespace = "occ-acme", cpu_limit = "2" }
}

resource "occ_configuration" "support" {
  name     = "support"
  document = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
}

resource "occ_credential_source" "anthropic" {
  name       = "anthropic"
  compute    = occ_compute.prod
  method     = "api_key"
  secret_ref = { name = "anthropic", key = "api-key" }
}

# Embedded OpenClaw: the harness is resolved from the configuration (an
# unambiguous built-in provider resolves to openclaw), the mode defaults to
# embedded. The plan shows the admitted revision in admitted_document.
resource "occ_agent" "support" {
  name          = "support"
  compute       = occ_compute.prod
  configuration = occ_configuration.support
  harness_auth  = { source = occ_credential_source.anthropic }
  timeouts      = { create = "15m", update = "15m", delete = "5m" }
}

# Dedicated Codex: a gateway beside a separate Codex app server.
resource "occ_configuration" "coder" {
  name     = "coder"
  document = jsonencode({ agents = { defaults = { model = "codex/gpt-5-codex" } } })
}

resource "occ_credential_source" "codex" {
  name       = "codex"
  compute    = occ_compute.prod
  method     = "codex_pat"
  secret_ref = { name = "codex", key = "token" }
}

resource "occ_agent" "coder" {
  name           = "coder"
  compute        = occ_compute.prod
  configuration  = occ_configuration.coder
  harness        = "codex"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.codex }
}
