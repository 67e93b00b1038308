# Terraform 1.12 and later: adopt an agent by its identity instead of an id
# string. On Kubernetes, its name and namespace (of the provider's cluster);
# over SSH, its name, host and (when not 22) port instead of the namespace:
#   identity = { name = "edge", host = "10.0.0.5", port = 2222 }
import {
  to       = occ_agent.support
  identity = { name = "support", namespace = "occ-acme" }
}
