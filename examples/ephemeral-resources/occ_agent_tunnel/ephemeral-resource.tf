# Call an agent from the machine running Terraform, after every new
# revision: the tunnel gives a local URL for the run, the gateway token the
# credential; neither is written to state or plan. The configuration must
# enable the gateway's chat completions endpoint.
ephemeral "occ_agent_tunnel" "support" {
  agent = occ_agent.support
}

ephemeral "occ_gateway_token" "support" {
  agent = occ_agent.support
}

resource "terraform_data" "smoke" {
  triggers_replace = [occ_agent.support.revision_id]

  provisioner "local-exec" {
    command = "curl -fsS -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d '{\"model\":\"openclaw/default\",\"messages\":[{\"role\":\"user\",\"content\":\"Reply with ok\"}]}' \"$URL/v1/chat/completions\""
    environment = {
      URL   = ephemeral.occ_agent_tunnel.support.url
      TOKEN = ephemeral.occ_gateway_token.support.token
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
