terraform {
  required_providers {
    occ = {
      source  = "occ-platform/occ"
      version = "~> 0.1"
    }
  }
}

# Connection settings, and how plans and applies meet the targets. Admission
# at plan needs no server; the preflight (on by default) then reads, at plan,
# the cluster or host each new revision would deploy to; a refresh reads what
# is in state back from its cluster or host.
provider "occ" {
  # The agents of one apply roll a changed configuration or credential source
  # out one canary first, five at a time, and stop at the first failure.
  rollout = {
    canary       = 1
    max_parallel = 5
  }
  kubernetes = {
    config_path    = "~/.kube/config"
    config_context = "prod"
  }
  ssh = {
    user  = "occ"
    agent = true # authenticate with the agent at SSH_AUTH_SOCK
  }
}
