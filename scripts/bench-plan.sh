#!/usr/bin/env bash
# Usage: scripts/bench-plan.sh [N]      (N defaults to 200; BENCH_REPS to 3)
#
# How much does the occ provider add to `terraform plan`? Two throwaway
# configurations are planned with the local Terraform CLI:
#   baseline  N terraform_data resources (built in: no provider at all)
#   occ       one occ_compute, occ_configuration and occ_credential_source,
#             and N occ_agent resources referencing them, planned against
#             bin/terraform-provider-occ through dev_overrides
# Each is planned BENCH_REPS times after one unmeasured warm-up run
# (`plan -refresh=false -lock=false -input=false`, empty state, so everything
# is a create); the median wall time of each and their ratio are printed.
#
# Provider memory: one extra, unmeasured plan of the occ configuration runs
# the provider through GNU time (`%M`, the peak resident set size of the
# provider process, from the kernel's rusage), once per provider process
# Terraform starts. Without GNU time, /proc/PID/status VmHWM of the provider
# processes is sampled every 50 ms instead, which is a lower bound
# (BENCH_RSS_METHOD=sample forces that).
#
# The comparison above plans offline (OCC_PREFLIGHT=false: the no-op
# provider contacts nothing either). With BENCH_KUBECONFIG naming a cluster
# (make cluster-up's .dev/cluster/kubeconfig), the occ configuration is
# also planned for 1 and N agents in an existing namespace of it, with the
# plan's preflight on and off: what the preflight adds.
#
# Side by side with the hashicorp kubernetes provider: with
# KUBERNETES_PROVIDER naming its binary (v3.2.1 built from source, for
# example), N "stacks" of each are planned: N occ_configuration,
# occ_credential_source and occ_agent (one per agent) against N
# kubernetes_config_map_v1, kubernetes_deployment_v1 and
# kubernetes_service_v1. Both plan offline (-refresh=false, nothing to
# read); the kubernetes provider is given BENCH_KUBECONFIG when set.
#
# BENCH_PROFILE=DIR runs the occ plans through internal/benchmark/profprovider
# (the same provider, with a CPU and an allocation profile per provider
# process in DIR; `go tool pprof -top bin/terraform-provider-occ DIR/cpu-PID.pprof`).
#
# It prints figures only; it asserts nothing. Run it through `make bench`,
# which builds the provider first.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench-lib.sh
. "${root}/scripts/bench-lib.sh"
n="${1:-200}"
reps="${BENCH_REPS:-3}"
terraform="${TERRAFORM:-terraform}"
bin="${root}/bin/terraform-provider-occ"
noop_bin="${root}/.dev/noop-bin/terraform-provider-noop"
prof_bin="${root}/.dev/prof-bin/terraform-provider-occ"
k8s_bin="${KUBERNETES_PROVIDER:-}"

positive_int N "$n"
positive_int BENCH_REPS "$reps"
for b in "$bin" "$noop_bin"; do
	if [ ! -x "$b" ]; then
		echo "error: ${b} is missing: run 'make bench', which builds the provider and the no-op baseline provider." >&2
		exit 1
	fi
done
if [ -n "${BENCH_PROFILE:-}" ]; then
	mkdir -p "$BENCH_PROFILE"
	go build -C "$root" -o "$prof_bin" ./internal/benchmark/profprovider
	bin="$prof_bin"
	export BENCH_PROFILE
fi
"${root}/scripts/check-terraform.sh" "$terraform" >/dev/null

work="$(mktemp -d "${TMPDIR:-/tmp}/occ-bench-plan.XXXXXX")"
sampler_pid=""
cleanup() {
	if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 LC_ALL=C OCC_PREFLIGHT=false
unset TF_LOG TF_LOG_PROVIDER TF_LOG_PATH

k8s_plugin_dir "$work"
write_cli_config() { # FILE PLUGIN_DIR
	cat >"$1" <<EOF
provider_installation {
  dev_overrides {
    "occ-platform/occ" = "$2"
    "occ-platform/noop" = "${noop_bin%/*}"
    ${k8s_override}
  }
  direct {}
}
EOF
}
write_cli_config "${work}/terraformrc" "${bin%/*}"
export TF_CLI_CONFIG_FILE="${work}/terraformrc"

mkdir -p "${work}/baseline" "${work}/occ" "${work}/noop"
cat >"${work}/baseline/main.tf" <<EOF
resource "terraform_data" "r" {
  count = ${n}
  input = "agent-\${count.index}"
}
EOF
# The provider and the one compute of both occ configurations.
occ_head='terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

resource "occ_compute" "k" {
  name = "bench"
  kubernetes = {
    namespace = "bench"
    cpu_limit = "2"
  }
}'
cat >"${work}/occ/main.tf" <<EOF
${occ_head}

resource "occ_configuration" "c" {
  name = "bench"
  document = jsonencode({
    agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }
  })
}

resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "anthropic", key = "api-key" }
}

resource "occ_agent" "a" {
  count         = ${n}
  name          = "agent-\${count.index}"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}
EOF

# The no-op baseline: the same configuration against a provider with the
# same schemas and no behaviour (internal/benchmark/noopprovider).
sed -e 's/occ_/noop_/g' -e 's#occ-platform/occ#occ-platform/noop#' -e 's/^    occ = {/    noop = {/' \
	"${work}/occ/main.tf" >"${work}/noop/main.tf"

# plan DIR: runs one plan, prints its wall time in seconds. On failure, shows
# Terraform's output and stops the script.
plan() {
	local dir="$1" start end log="${work}/plan.log"
	start="$EPOCHREALTIME"
	if ! "$terraform" -chdir="$dir" plan -refresh=false -lock=false -input=false -no-color >"$log" 2>&1; then
		echo "error: terraform plan failed in ${dir##*/}:" >&2
		sed 's/^/    /' "$log" >&2
		exit 1
	fi
	end="$EPOCHREALTIME"
	awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }'
}

plan_summary() { grep -m 1 '^Plan:' "${work}/plan.log" || echo "(no Plan: line)"; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# measure NAME DIR: warm-up, then BENCH_REPS timed plans; sets MEDIAN.
measure() {
	local name="$1" dir="$2" times=() t i
	plan "$dir" >/dev/null
	for ((i = 1; i <= reps; i++)); do
		t="$(plan "$dir")"
		times+=("$t")
	done
	MEDIAN="$(median "${times[@]}")"
	printf '%-9s median %7.3f s   runs: %s   %s\n' "$name" "$MEDIAN" "${times[*]}" "$(plan_summary)"
}

# Provider peak RSS, in KiB, printed as "KIB PROCESSES METHOD"; "" if unknown.
provider_peak_rss() {
	local out="${work}/rss.txt"
	: >"$out"
	if [ "${BENCH_RSS_METHOD:-time}" = time ] && /usr/bin/time -f '%M' -o /dev/null true 2>/dev/null; then
		# A stand-in plugin directory whose terraform-provider-occ runs the
		# real binary under GNU time; -a appends one line per process.
		mkdir -p "${work}/rss-bin"
		cat >"${work}/rss-bin/terraform-provider-occ" <<EOF
#!/bin/sh
exec /usr/bin/time -a -o '${out}' -f '%M' '${bin}' "\$@"
EOF
		chmod +x "${work}/rss-bin/terraform-provider-occ"
		write_cli_config "${work}/terraformrc-rss" "${work}/rss-bin"
		TF_CLI_CONFIG_FILE="${work}/terraformrc-rss" plan "${work}/occ" >/dev/null
		awk '/^[0-9]+$/ { if ($1 > m) m = $1; c++ } END { if (c) print m, c, "GNU time %M (exact peak per process)" }' "$out"
	else
		(
			# Shell builtins only (no fork per process), so a scan is quick.
			# Terraform starts the plugin with its path as argv[0].
			while :; do
				for d in /proc/[0-9]*; do
					arg0=""
					{ IFS= read -r -d '' arg0 <"${d}/cmdline"; } 2>/dev/null || true
					[ "$arg0" = "$bin" ] || continue
					{ while read -r key val _; do
						if [ "$key" = "VmHWM:" ]; then
							echo "${d#/proc/} ${val}"
							break
						fi
					done <"${d}/status"; } 2>/dev/null || true
				done
				sleep 0.05
			done
		) >"$out" &
		sampler_pid=$!
		plan "${work}/occ" >/dev/null
		kill "$sampler_pid" 2>/dev/null || true
		wait "$sampler_pid" 2>/dev/null || true
		sampler_pid=""
		awk '{ if ($2 > m) m = $2; seen[$1] = 1 } END { for (p in seen) c++; if (c) print m, c, "/proc VmHWM sampled every 50 ms (lower bound)" }' "$out"
	fi
}

echo "bench-plan: N=${n}, ${reps} timed runs each after one warm-up; $("${root}/scripts/check-terraform.sh" "$terraform")"
echo "            provider: ${bin}"
measure baseline "${work}/baseline"
base="$MEDIAN"
measure noop "${work}/noop"
noop="$MEDIAN"
measure occ "${work}/occ"
occ="$MEDIAN"
awk -v b="$base" -v z="$noop" -v o="$occ" -v n="$n" 'BEGIN {
	if (z > 0) printf "ratio     occ / noop = %.2fx   (same schemas, no behaviour: what the occ provider itself adds; target <= 1.3x)\n", o / z
	if (b > 0) printf "ratio     occ / terraform_data = %.2fx   (occ plans %d resources, baseline %d)\n", o / b, n + 3, n
}'

rss="$(provider_peak_rss)"
if [ -n "$rss" ]; then
	read -r kib procs method <<<"$rss"
	awk -v k="$kib" -v p="$procs" -v m="$method" 'BEGIN {
		printf "provider  peak RSS %.1f MiB (largest of %d provider process(es) in one plan; %s)\n", k / 1024, p, m
	}'
else
	echo "provider  peak RSS: not measured (no GNU time, and no provider process was seen)"
fi

if [ -n "$k8s_bin" ]; then
	# N stacks each: what one agent costs a user of either provider.
	mkdir -p "${work}/occ-stacks" "${work}/k8s-stacks"
	{
		echo "${occ_head}"
		occ_stacks "$n" 0
	} >"${work}/occ-stacks/main.tf"
	k8s_stacks "$n" '"bench"' 0 "${BENCH_KUBECONFIG:-}" >"${work}/k8s-stacks/main.tf"
	echo "stacks:   N=${n} of each; kubernetes provider: ${k8s_bin}"
	measure k8s "${work}/k8s-stacks"
	k8s="$MEDIAN"
	measure occ "${work}/occ-stacks"
	awk -v k="$k8s" -v o="$MEDIAN" 'BEGIN { if (k > 0) printf "ratio     occ stacks / kubernetes stacks = %.2fx   (target <= 0.7x)\n", o / k }'
fi

if [ -n "${BENCH_KUBECONFIG:-}" ]; then
	ns="${BENCH_NAMESPACE:-default}"
	for count in 1 "$n"; do
		mkdir -p "${work}/pf-${count}"
		sed -e "s/count         = ${n}/count         = ${count}/" -e "s/namespace = \"bench\"/namespace = \"${ns}\"/" \
			-e 's#^terraform {#provider "occ" {\n  kubernetes = { config_path = "'"${BENCH_KUBECONFIG}"'" }\n}\n\nterraform {#' \
			"${work}/occ/main.tf" >"${work}/pf-${count}/main.tf"
		OCC_PREFLIGHT=false measure "off/${count}" "${work}/pf-${count}"
		off="$MEDIAN"
		OCC_PREFLIGHT=true measure "on/${count}" "${work}/pf-${count}"
		grep -q 'was not checked against' "${work}/plan.log" && echo "          (the preflight could not read the cluster: see the plan's warning)"
		awk -v a="$off" -v b="$MEDIAN" -v c="$count" 'BEGIN { printf "preflight %d agent(s) in namespace '"${ns}"': +%.3f s (%.2fx the plan without it)\n", c, b - a, (a > 0 ? b / a : 0) }'
	done
fi
