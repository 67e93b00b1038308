# In another configuration (another workspace) than the one that manages the
# agent: read it by where it runs. Nothing is written.
data "occ_agent" "support" {
  name      = "support"
  namespace = "occ-acme" # Kubernetes; on SSH: host = "10.0.0.5"
}

output "support_endpoint" {
  value = data.occ_agent.support.endpoint # "http://support.occ-acme.svc:18789"
}

# Only once the agent serves its activated revision.
check "support_active" {
  assert {
    condition     = data.occ_agent.support.status == "active"
    error_message = "agent support is ${data.occ_agent.support.status}"
  }
}
