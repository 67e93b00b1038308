# Find the agents that run in a namespace (Terraform 1.14 and later):
#   terraform query
# prints each one's identity; `terraform query -generate-config-out=agents.tf`
# writes an import block per agent, to adopt them.
list "occ_agent" "acme" {
  provider         = occ
  include_resource = true
  config {
    namespace = "occ-acme"
  }
}

# The agents on an SSH host, reached with the provider's ssh settings:
list "occ_agent" "edge" {
  provider = occ
  config {
    host = "10.0.0.5"
    port = 2222
  }
}
