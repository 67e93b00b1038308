output "model" {
  # { provider = "openai", model = "vendor/model" }
  value = provider::occ::parse_model_ref("openai/vendor/model")
}
