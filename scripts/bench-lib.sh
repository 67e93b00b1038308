# Sourced by scripts/bench-plan.sh and scripts/bench-apply.sh: what both
# check of their arguments, and the stacks of both sides of the
# side-by-side benchmarks (occ_stacks, k8s_stacks).

# positive_int WHAT VALUE: exits 2, naming WHAT, unless VALUE is a positive
# integer.
positive_int() {
	case "$2" in '' | *[!0-9]* | 0) echo "error: $1 must be a positive integer (got '$2')" >&2; exit 2 ;; esac
}

# k8s_plugin_dir WORK: with KUBERNETES_PROVIDER set, checks it is an
# executable and links it as WORK/k8s-bin/terraform-provider-kubernetes;
# sets k8s_override to the dev_overrides line for it ("" without it).
k8s_plugin_dir() {
	k8s_override=""
	[ -n "${KUBERNETES_PROVIDER:-}" ] || return 0
	if [ ! -x "$KUBERNETES_PROVIDER" ]; then
		echo "error: KUBERNETES_PROVIDER=${KUBERNETES_PROVIDER} is not an executable (the hashicorp kubernetes provider's binary)" >&2
		exit 1
	fi
	mkdir -p "$1/k8s-bin"
	ln -sf "$(cd "$(dirname "$KUBERNETES_PROVIDER")" && pwd)/$(basename "$KUBERNETES_PROVIDER")" "$1/k8s-bin/terraform-provider-kubernetes"
	k8s_override="\"hashicorp/kubernetes\" = \"$1/k8s-bin\""
}

# k8s_stacks N NAMESPACE SECRETS KUBECONFIG: prints N stacks of
# kubernetes_config_map_v1, kubernetes_deployment_v1 (one gateway
# container reading its key from a Secret and its configuration from the
# ConfigMap) and kubernetes_service_v1, what one occ_agent deploys at its
# simplest. NAMESPACE is an HCL expression (a quoted name, or a
# kubernetes_namespace_v1's). With SECRETS=1 each stack also writes its
# Secret (kubernetes_secret_v1), as an occ_credential_source with
# value_wo does; otherwise the Deployment names Secret agent-N. With a
# KUBECONFIG, the provider block points at it.
k8s_stacks() {
	local n="$1" ns="$2" secrets="$3" kubeconfig="${4:-}" secret_name='"agent-${count.index}"'
	cat <<EOF
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
  }
}
EOF
	if [ -n "$kubeconfig" ]; then
		cat <<EOF

provider "kubernetes" {
  config_path = "${kubeconfig}"
}
EOF
	fi
	if [ "$secrets" = 1 ]; then
		secret_name='kubernetes_secret_v1.k[count.index].metadata[0].name'
		cat <<EOF

resource "kubernetes_secret_v1" "k" {
  count = ${n}
  metadata {
    name      = "agent-\${count.index}"
    namespace = ${ns}
  }
  data = { "api-key" = "bench-key-\${count.index}" }
}
EOF
	fi
	cat <<EOF

resource "kubernetes_config_map_v1" "c" {
  count = ${n}
  metadata {
    name      = "agent-\${count.index}"
    namespace = ${ns}
  }
  data = {
    "openclaw.json" = jsonencode({
      agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
    })
  }
}

resource "kubernetes_deployment_v1" "d" {
  count = ${n}
  metadata {
    name      = "agent-\${count.index}"
    namespace = ${ns}
  }
  spec {
    replicas = 1
    selector {
      match_labels = { app = "agent-\${count.index}" }
    }
    template {
      metadata {
        labels = { app = "agent-\${count.index}" }
      }
      spec {
        container {
          name  = "gateway"
          image = "ghcr.io/occ-platform/runtime/openclaw:latest"
          port {
            container_port = 18789
          }
          env {
            name = "ANTHROPIC_API_KEY"
            value_from {
              secret_key_ref {
                name = ${secret_name}
                key  = "api-key"
              }
            }
          }
          resources {
            limits = { cpu = "2" }
          }
          volume_mount {
            name       = "config"
            mount_path = "/config"
          }
        }
        volume {
          name = "config"
          config_map {
            name = kubernetes_config_map_v1.c[count.index].metadata[0].name
          }
        }
      }
    }
  }
}

resource "kubernetes_service_v1" "s" {
  count = ${n}
  metadata {
    name      = "agent-\${count.index}"
    namespace = ${ns}
  }
  spec {
    selector = { app = "agent-\${count.index}" }
    port {
      port = 18789
    }
  }
}
EOF
}

# occ_stacks N APPLIED: prints N stacks of occ_configuration,
# occ_credential_source and occ_agent on occ_compute.k (which the caller
# writes). APPLIED=1 is for an apply: the source writes its own Secret
# (value_wo) and the agent has generous timeouts; otherwise the source
# names Secret agent-N (secret_ref), which a plan does not read.
occ_stacks() {
	local n="$1" applied="$2"
	cat <<EOF

resource "occ_configuration" "c" {
  count = ${n}
  name  = "agent-\${count.index}"
  document = jsonencode({
    agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
  })
}
EOF
	if [ "$applied" = 1 ]; then
		cat <<EOF

resource "occ_credential_source" "s" {
  count            = ${n}
  name             = "agent-\${count.index}"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = "bench-key-\${count.index}"
  value_wo_version = 1
}
EOF
	else
		cat <<EOF

resource "occ_credential_source" "s" {
  count      = ${n}
  name       = "agent-\${count.index}"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "agent-\${count.index}", key = "api-key" }
}
EOF
	fi
	cat <<EOF

resource "occ_agent" "a" {
  count         = ${n}
  name          = "agent-\${count.index}"
  compute       = occ_compute.k
  configuration = occ_configuration.c[count.index]
  harness_auth  = { source = occ_credential_source.s[count.index] }
EOF
	if [ "$applied" = 1 ]; then
		echo '  timeouts      = { create = "10m", update = "10m", delete = "5m" }'
	fi
	echo "}"
}
