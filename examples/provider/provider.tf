terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

# Connection settings only. A plan never contacts the cluster or the hosts.
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
