# A Kubernetes tenant namespace.
resource "occ_compute" "prod" {
  name = "prod"
  kubernetes = {
    namespace    = "occ-acme"
    cpu_limit    = "2"
    memory_limit = "4Gi"
    logging      = { ownership = "platform", level = "info" }
  }
}

# A namespace whose dedicated harnesses run in OpenShell sandboxes, with model
# keys from a Credential Gateway.
resource "occ_compute" "sandboxed" {
  name = "sandboxed"
  kubernetes = {
    namespace          = "occ-sandboxed"
    node_workers       = 8
    sandbox_driver     = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "gpu-workers" }
    credential_gateway = { name = "openai-keys" }
  }
}

# An SSH host with systemd. The host key is always verified.
resource "occ_compute" "edge" {
  name = "edge"
  ssh = {
    host     = "10.0.0.5"
    host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHPvWGJQ0YPgQdiedKaM18KfSQNuvDhlMYl5yykHBSiY edge"
  }
}
