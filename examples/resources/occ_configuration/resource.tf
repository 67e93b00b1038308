resource "occ_configuration" "support" {
  name = "support"
  # JSON or JSON5; file("openclaw.json5") works the same.
  document = jsonencode({
    agents = {
      defaults = {
        model = {
          primary   = "anthropic/claude-sonnet-4-5"
          fallbacks = ["anthropic/claude-haiku-4-5"]
        }
      }
    }
    # The binding below reaches the gateway as TELEGRAM (upper case).
    channels = { telegram = { botToken = "$${TELEGRAM}" } }
  })
  secret_bindings = {
    telegram = { secret = "tg-bot", key = "token" }
  }
}

output "generation" {
  value = occ_configuration.support.generation
}
