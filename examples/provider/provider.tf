terraform {
  required_providers {
    occ = {
      source  = "occ-platform/occ"
      version = "~> 0.1"
    }
  }
}

# Connection settings only. Admission at plan needs no server; a refresh reads
# what is in state back from its cluster or host.
provider "occ" {
  kubernetes = {
    config_path    = "~/.kube/config"
    config_context = "prod"
  }
  ssh = {
    user  = "occ"
    agent = true # authenticate with the agent at SSH_AUTH_SOCK
  }
}
