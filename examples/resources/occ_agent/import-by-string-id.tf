# Adopt an agent that runs already (written by another configuration, or a
# state that lost it): NAMESPACE/NAME on Kubernetes, HOST/NAME over SSH.
import {
  to = occ_agent.support
  id = "occ-acme/support"
}
