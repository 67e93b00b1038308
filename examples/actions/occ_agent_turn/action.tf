# One turn to an agent: after a key rotation or a runtime upgrade, or as a CI
# smoke test. Its configuration must enable the gateway's chat completions
# endpoint (gateway.http.endpoints.chatCompletions.enabled = true).
#
#   terraform apply -invoke=action.occ_agent_turn.smoke
#
# prints the first line of the answer and the time to the first token;
# a refusal or a failed run fails the command with its code.
action "occ_agent_turn" "smoke" {
  config {
    agent   = occ_agent.support
    message = "Reply with the single word: ok"
    timeout = "2m"
  }
}

# Or after every apply that deploys a new revision of the agent:
resource "terraform_data" "support_revision" {
  input = occ_agent.support.revision_id

  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.occ_agent_turn.smoke]
    }
  }
}

resource "occ_compute" "prod" {
  name       = "prod"
  kubernetes = { namespace = "occ-acme" }
}

resource "occ_configuration" "support" {
  name = "support"
  document = jsonencode({
    agents  = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
    gateway = { http = { endpoints = { chatCompletions = { enabled = true } } } }
  })
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
