# Restart an agent without a new revision, for example after rotating the
# key in its credential source's Secret in place:
#
#   terraform apply -invoke=action.occ_agent_restart.support
#
# blocks until the agent passes its startup probe again (a probe of the
# model with the new key), or fails with the code that held it.
action "occ_agent_restart" "support" {
  config {
    agent   = occ_agent.support
    timeout = "10m"
  }
}

# Or whenever the rotated Secret's version changes (a value managed
# elsewhere, passed in as a variable):
variable "anthropic_key_version" {
  type = string
}

resource "terraform_data" "anthropic_key_version" {
  input = var.anthropic_key_version

  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.occ_agent_restart.support]
    }
  }
}

resource "occ_compute" "prod" {
  name       = "prod"
  kubernetes = { namespace = "occ-acme" }
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

resource "occ_agent" "support" {
  name          = "support"
  compute       = occ_compute.prod
  configuration = occ_configuration.support
  harness_auth  = { source = occ_credential_source.anthropic }
}
