#!/usr/bin/env bash
# Usage: scripts/bench-apply.sh [N]     (N defaults to 50; BENCH_PARALLELISM to 10)
#
# Apply, refresh and destroy at scale on a running cluster, side by side
# with the hashicorp kubernetes provider. BENCH_KUBECONFIG names the
# cluster: the local control plane with kwok nodes (make cluster-up
# REAL_NODE=0; .dev/cluster/kubeconfig), where Pods act out their runtime
# and no container runs, so the figures are the providers' and the API
# server's, not the images'.
#   occ   one occ_compute (its tenant namespace, created by the apply) and N
#         stacks of occ_configuration, occ_credential_source (value_wo: the
#         provider writes its Secret) and occ_agent (embedded)
#   k8s   with KUBERNETES_PROVIDER naming its binary (v3.2.1 built from
#         source, for example): one kubernetes_namespace_v1 and N stacks of
#         kubernetes_secret_v1, kubernetes_config_map_v1,
#         kubernetes_deployment_v1 (waits for its rollout) and
#         kubernetes_service_v1
# For each: `apply -parallelism=BENCH_PARALLELISM` from an empty state, a
# `plan` that refreshes everything (it must find nothing to change), and a
# `destroy`; each timed, and the API server's requests during it counted
# cluster-wide (the sum of apiserver_request_total before and after, read
# by internal/benchmark/apicount: every client, the controllers and kwok
# included). The namespaces are bench-occ-PID and bench-k8s-PID, and the
# destroy removes them again.
# The kube-controller-manager of make cluster-up runs its controllers'
# clients at its default 20 requests/s each (burst 30): with 50
# Deployments at once, the deployment and replicaset controllers' own
# throttling sets the pace of both sides. BENCH_CLUSTER_FLAGS (set by make
# bench-apply from the running cluster's flags) is printed; a cluster
# started with CLUSTER_KCM_QPS=N runs them at N.
#
# It prints figures only; it asserts nothing. Run it through
# `make bench-apply`, which builds the provider first.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench-lib.sh
. "${root}/scripts/bench-lib.sh"
n="${1:-50}"
par="${BENCH_PARALLELISM:-10}"
terraform="${TERRAFORM:-terraform}"
bin="${root}/bin/terraform-provider-occ"
apicount="${root}/.dev/bench-bin/apicount"
k8s_bin="${KUBERNETES_PROVIDER:-}"
kubeconfig="${BENCH_KUBECONFIG:-}"

positive_int N "$n"
positive_int BENCH_PARALLELISM "$par"
if [ -z "$kubeconfig" ] || [ ! -r "$kubeconfig" ]; then
	echo "error: BENCH_KUBECONFIG must name a running cluster's kubeconfig: make cluster-up REAL_NODE=0, then BENCH_KUBECONFIG=${root}/.dev/cluster/kubeconfig" >&2
	exit 1
fi
kubeconfig="$(cd "$(dirname "$kubeconfig")" && pwd)/$(basename "$kubeconfig")"
for b in "$bin" "$apicount"; do
	if [ ! -x "$b" ]; then
		echo "error: ${b} is missing: run 'make bench-apply', which builds it." >&2
		exit 1
	fi
done
"${root}/scripts/check-terraform.sh" "$terraform" >/dev/null
"$apicount" "$kubeconfig" >/dev/null

work="$(mktemp -d "${TMPDIR:-/tmp}/occ-bench-apply.XXXXXX")"
applied=()
cleanup() {
	local d
	for d in "${applied[@]}"; do
		"$terraform" -chdir="$d" destroy -auto-approve -lock=false -input=false -no-color >"${d}/cleanup.log" 2>&1 ||
			echo "warning: the destroy of ${d##*/} failed; its namespace may be left: see ${d}/cleanup.log" >&2
	done
	if [ "${#applied[@]}" -eq 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 LC_ALL=C
unset TF_LOG TF_LOG_PROVIDER TF_LOG_PATH

k8s_plugin_dir "$work"
cat >"${work}/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "occ-platform/occ" = "${bin%/*}"
    ${k8s_override}
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE="${work}/terraformrc"

mkdir -p "${work}/occ"
cat >"${work}/occ/main.tf" <<EOF
terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

provider "occ" {
  kubernetes = { config_path = "${kubeconfig}" }
}

resource "occ_compute" "k" {
  name = "bench"
  kubernetes = {
    namespace = "bench-occ-$$"
    cpu_limit = "2"
  }
}
EOF
occ_stacks "$n" 1 >>"${work}/occ/main.tf"

mkdir -p "${work}/k8s"
{
	k8s_stacks "$n" 'kubernetes_namespace_v1.n.metadata[0].name' 1 "$kubeconfig"
	cat <<EOF

resource "kubernetes_namespace_v1" "n" {
  metadata {
    name = "bench-k8s-$$"
  }
}
EOF
} >"${work}/k8s/main.tf"

# run NAME DIR EXPECT -- ARGS...: one terraform command, timed and counted;
# prints "NAME  S s  R requests"; on failure shows Terraform's output and
# stops the script. EXPECT is the exit status that counts as success (a
# refresh plan runs with -detailed-exitcode and must find nothing: 0).
WALL="" REQS=""
run() {
	local name="$1" dir="$2" expect="$3" start end before after rc=0 log="${2}/${1// /-}.log"
	shift 4
	before="$("$apicount" "$kubeconfig")"
	start="$EPOCHREALTIME"
	"$terraform" -chdir="$dir" "$@" -lock=false -input=false -no-color >"$log" 2>&1 || rc=$?
	end="$EPOCHREALTIME"
	after="$("$apicount" "$kubeconfig")"
	if [ "$rc" -ne "$expect" ]; then
		echo "error: terraform ${1} in ${dir##*/} exited ${rc} (want ${expect}):" >&2
		tail -n 40 "$log" | sed 's/^/    /' >&2
		exit 1
	fi
	WALL="$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }')"
	REQS=$((after - before))
	printf '%-4s %-8s %8.3f s  %6d requests (cluster-wide)\n' "${dir##*/}" "$name" "$WALL" "$REQS"
}

echo "bench-apply: N=${n} stacks each, -parallelism=${par}; $("${root}/scripts/check-terraform.sh" "$terraform")"
echo "             cluster: ${kubeconfig}${BENCH_CLUSTER_FLAGS:+ (make cluster-up flags: ${BENCH_CLUSTER_FLAGS})}"
case " ${BENCH_CLUSTER_FLAGS:-} " in
"  " | *" -controller-manager-qps "*) ;;
*) echo "             the controller manager's clients run at its default 20 requests/s each: its deployment and replicaset controllers bound both sides (CLUSTER_KCM_QPS=200 make cluster-up REAL_NODE=0 lifts it)" ;;
esac
sides=(occ)
if [ -n "$k8s_bin" ]; then sides+=(k8s); fi
declare -A apply_s apply_r refresh_s refresh_r
for side in "${sides[@]}"; do
	dir="${work}/${side}"
	"$terraform" -chdir="$dir" init -input=false -no-color >"${dir}/init.log" 2>&1 || true
	applied+=("$dir")
	run apply "$dir" 0 -- apply -auto-approve -parallelism="$par"
	apply_s[$side]="$WALL" apply_r[$side]="$REQS"
	run refresh "$dir" 0 -- plan -detailed-exitcode -parallelism="$par"
	refresh_s[$side]="$WALL" refresh_r[$side]="$REQS"
	run destroy "$dir" 0 -- destroy -auto-approve -parallelism="$par"
	applied=("${applied[@]:0:${#applied[@]}-1}")
done
if [ -n "$k8s_bin" ]; then
	awk -v a="${apply_s[occ]}" -v b="${apply_s[k8s]}" -v ra="${apply_r[occ]}" -v rb="${apply_r[k8s]}" \
		-v c="${refresh_s[occ]}" -v d="${refresh_s[k8s]}" -v rc="${refresh_r[occ]}" -v rd="${refresh_r[k8s]}" 'BEGIN {
		if (b > 0) printf "ratio     apply occ / kubernetes = %.2fx time (target <= 0.6x), %d vs %d requests\n", a / b, ra, rb
		if (d > 0) printf "ratio     refresh occ / kubernetes = %.2fx time, %d vs %d requests\n", c / d, rc, rd
	}'
fi
