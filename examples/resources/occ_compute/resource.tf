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

# A namespace for production workloads: the runtime Pods run on dedicated
# nodes at a priority of their own, request less than their limits, carry the
# operator's labels and pull from a private registry. The PriorityClass and
# the pull Secret must exist; the provider creates neither.
resource "occ_compute" "production" {
  name = "production"
  kubernetes = {
    namespace      = "occ-production"
    runtime_image  = "registry.example.com/occ/runtime:2026.9.6"
    cpu_limit      = "2"
    cpu_request    = "500m"
    memory_limit   = "4Gi"
    memory_request = "2Gi"
    # The most node-local disk each runtime Pod may fill (logs, emptyDirs).
    ephemeral_storage_limit = "2Gi"
    node_selector           = { "example.com/pool" = "agents" }
    tolerations = [
      { key = "example.com/dedicated", operator = "Equal", value = "agents", effect = "NoSchedule" },
    ]
    priority_class_name = "agents"
    pod_labels          = { team = "support", "example.com/cost-center" = "cc-42" }
    image_pull_secrets  = ["registry-credentials"]
    image_pull_policy   = "IfNotPresent"
    # Each agent's state on a 20Gi claim of the "fast-ssd" class, kept when the
    # agent is destroyed (a later agent of the same name mounts it again).
    state = {
      size              = "20Gi"
      storage_class     = "fast-ssd"
      retain_on_destroy = true
    }
    # The gateway admits the ingress controller's namespace only; every
    # component may also reach a model proxy on port 8080.
    network_policy = {
      ingress_from = [{ namespace_selector = { "kubernetes.io/metadata.name" = "ingress-nginx" } }]
      extra_egress = [{ to = [{ ip_block = { cidr = "10.20.0.0/16" } }], ports = [{ port = 8080 }] }]
    }
    # Each agent's gateway behind an internal load balancer; its endpoint is
    # the load balancer's address. Changing this restarts no agent.
    service = {
      type                        = "LoadBalancer"
      annotations                 = { "service.beta.kubernetes.io/aws-load-balancer-internal" = "true" }
      load_balancer_source_ranges = ["10.0.0.0/8"]
    }
  }
}

# A namespace whose dedicated Codex harnesses run in OpenShell sandboxes, with
# model keys from a Credential Gateway.
resource "occ_compute" "sandboxed" {
  name = "sandboxed"
  kubernetes = {
    namespace          = "occ-sandboxed"
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
