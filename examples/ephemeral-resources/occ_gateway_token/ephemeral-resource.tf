# Hand an agent's gateway token to a client without writing it to state or
# plan: here a CLI run by a provisioner after each new revision. It can also
# go into another provider's configuration or a write-only attribute.
ephemeral "occ_gateway_token" "support" {
  agent = occ_agent.support
}

resource "terraform_data" "register" {
  triggers_replace = [occ_agent.support.revision_id]

  provisioner "local-exec" {
    command     = "./register-client --agent support --token-from-env OCC_GATEWAY_TOKEN"
    environment = { OCC_GATEWAY_TOKEN = ephemeral.occ_gateway_token.support.token }
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
