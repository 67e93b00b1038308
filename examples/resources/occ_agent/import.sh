# NAMESPACE/NAME on Kubernetes; HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME
# over SSH. Refresh reads the running revision; the next plan adds the
# configuration and deploys nothing when the running revision matches it.
terraform import occ_agent.support occ-acme/support
