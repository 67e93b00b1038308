#!/usr/bin/env bash
# make demo: apply examples/quickstart to Kubernetes, where the real OpenClaw
# gateway starts behind the real startup probe, and show what the provider
# does around it.
#
# Without KUBECONFIG / KUBE_CONFIG_PATH it starts the local cluster with the
# real node (make cluster-up REAL_NODE=1): the control plane on loopback,
# and containerd, kubelet, kube-proxy and CoreDNS in a network namespace of
# their own, running the runtime images make images built. The model is
# local: a fake OpenAI-compatible endpoint inside the node's network
# namespace that accepts one demo key. Nothing is billed; no traffic leaves
# this machine.
#
# Steps: apply the quickstart (the startup probe calls the model with the
# key, the gateway starts, apply returns once the revision is activated); a
# second plan is empty; /readyz through kubectl port-forward to the Agent's
# Service, then one turn through it (a message in, the model's answer out,
# through the gateway's chat completions endpoint); a plan the provider refuses, with its rule; a plan the
# cluster refuses (an agent asking 64 CPUs: the plan's preflight finds no node with room for it, and nothing
# is written); a held failure (the
# same Agent with a wrong key, in a namespace of its own: the apply fails
# with AUTHENTICATION_FAILED and the startup record's fields); how to
# destroy both and stop the cluster.
#
# With a KUBECONFIG, the demo uses its current context only when that is the
# local cluster's own (its API server is the one make cluster-up runs);
# another context must be named: OCC_DEMO_CONTEXT=NAME. On such a cluster
# the model is whatever OCC_DEMO_MODEL_URL names (an OpenAI-compatible
# Responses endpoint the cluster's Pods reach; unset: OpenAI itself, which
# bills the call) with the key in OCC_DEMO_MODEL_KEY, and the cluster must
# be able to pull the runtime image (make images; docs/guides/startup-probe.md says how to push it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
terraform="${TERRAFORM:-terraform}"
work="$root/.dev/demo"
cluster_dir="$root/.dev/cluster"
quickstart="$root/examples/quickstart"
# The one key the local model endpoint takes (make cluster-up's default).
local_key="${CLUSTER_MODEL_KEY:-occ-demo-local-key}"
wrong_key="demo-key-the-model-refuses"

started=$SECONDS
step() { printf '==> [+%3ss] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# kubectl, for the context check, the port-forward and a look at the Pods
# (built once from the module proxy, about 30 s cold, then cached).
testenv/build.sh kubectl | { grep -E 'building|built' || true; } | sed 's/^/    /'
kubectl="$(testenv/build.sh path kubectl)"

# The local cluster's API server, when make cluster-up runs one.
local_host=""
local_model_url=""
read_cluster_env() {
	local_host="" local_model_url=""
	if [ -f "$cluster_dir/pid" ] && kill -0 "$(cat "$cluster_dir/pid")" 2>/dev/null && [ -f "$cluster_dir/cluster.env" ]; then
		local_host="$(sed -n 's/^OCC_TESTENV_KUBE_HOST=//p' "$cluster_dir/cluster.env")"
		local_model_url="$(sed -n 's/^OCC_TESTENV_MODEL_URL=//p' "$cluster_dir/cluster.env")"
	fi
}

if [ -z "${KUBECONFIG:-}" ] && [ -z "${KUBE_CONFIG_PATH:-}" ]; then
	[ "$(id -u)" -eq 0 ] || die "the local cluster's real node needs root (network namespaces, cgroups, containerd): run make demo as root, or give a KUBECONFIG"
	step "no KUBECONFIG given: starting the local cluster with the real node (make cluster-up REAL_NODE=1)"
	make --no-print-directory cluster-up REAL_NODE=1 CLUSTER_MODEL_KEY="$local_key" 2>&1 | sed 's/^/    /'
	export KUBECONFIG="$cluster_dir/kubeconfig"
fi
# The provider reads KUBE_CONFIG_PATH first, then KUBECONFIG; so does kubectl here.
kubeconfig="${KUBE_CONFIG_PATH:-$KUBECONFIG}"
IFS=: read -ra kubeconfig_files <<<"$kubeconfig"
for f in "${kubeconfig_files[@]}"; do
	[ -f "$f" ] || die "the kubeconfig $f does not exist (a local cluster's kubeconfig goes when make cluster-down stops it: unset KUBECONFIG and the demo starts one)"
done
k() { KUBECONFIG="$kubeconfig" "$kubectl" --context "$context" "$@"; }

read_cluster_env
context="${OCC_DEMO_CONTEXT:-}"
if [ -z "$context" ]; then
	context="$(KUBECONFIG="$kubeconfig" "$kubectl" config current-context 2>/dev/null)" ||
		die "the kubeconfig $kubeconfig has no current context; name one with OCC_DEMO_CONTEXT=NAME"
fi
server="$(KUBECONFIG="$kubeconfig" "$kubectl" config view --minify --context "$context" -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null)" ||
	die "the kubeconfig $kubeconfig has no context \"$context\""
if [ -n "$local_host" ] && [ "$server" = "$local_host" ]; then
	local_cluster=1
else
	local_cluster=0
	if [ -z "${OCC_DEMO_CONTEXT:-}" ]; then
		die "the current context of $kubeconfig is \"$context\" (API server $server), not the local cluster of make cluster-up${local_host:+ ($local_host)}.
The demo creates namespaces occ-quickstart and occ-demo-wrong-key there and deploys to them.
Unset KUBECONFIG and KUBE_CONFIG_PATH to use the local cluster (the demo starts it), or name the context to use: OCC_DEMO_CONTEXT=$context make demo"
	fi
fi
echo "    kubeconfig $kubeconfig, context $context, API server $server"

if [ "$local_cluster" = 1 ]; then
	[ -n "$local_model_url" ] ||
		die "the local cluster runs without the real node and its model endpoint (make cluster-up without REAL_NODE=1); stop it with make cluster-down, then run make demo again"
	model_url="$local_model_url/v1"
	model_key="$local_key"
	model_note="the model is local: a fake OpenAI-compatible endpoint at $local_model_url, inside the real node's network namespace, that answers \"ok\" to the demo key and 401 invalid_api_key to any other. Nothing is billed."
else
	[ -n "${OCC_DEMO_MODEL_KEY:-}" ] ||
		die "context \"$context\" is not the local cluster: set OCC_DEMO_MODEL_KEY to a key for the model (and OCC_DEMO_MODEL_URL to an OpenAI-compatible endpoint its Pods reach; unset: OpenAI itself, which bills the probe)"
	model_url="${OCC_DEMO_MODEL_URL:-}"
	model_key="$OCC_DEMO_MODEL_KEY"
	if [ -n "$model_url" ]; then
		model_note="the model is $model_url (OCC_DEMO_MODEL_URL) with the key in OCC_DEMO_MODEL_KEY."
	else
		model_note="the model is OpenAI's own endpoint with the key in OCC_DEMO_MODEL_KEY: the startup probe is a billed call."
	fi
fi
echo "    $model_note"

# Variables of the quickstart. The key goes through the environment, never
# the command line; a destroy sends no key at all.
vars=(-input=false -var "kube_context=$context")
[ -n "$model_url" ] && vars+=(-var "model_base_url=$model_url")
export TF_VAR_openai_api_key="$model_key"

# The wrong-key configuration's state is kept across runs (it is destroyed
# before it is applied again); the rest of the work directory is rewritten.
mkdir -p "$work"
rm -rf "$work"/*.log "$work/refused" "$work/too-big"

step "terraform apply examples/quickstart (returns once the real startup probe has passed and the revision is activated)"
t0=$SECONDS
"$terraform" -chdir="$quickstart" apply -auto-approve -no-color "${vars[@]}" >"$work/apply.log" 2>&1 || {
	cat "$work/apply.log" >&2
	die "the quickstart's apply failed (above; the cluster's logs: $cluster_dir)"
}
{ grep -E '^(occ_|Apply complete)' "$work/apply.log" || true; } | sed 's/^/    /'
step "activated in $((SECONDS - t0)) s"
echo "    revision: $("$terraform" -chdir="$quickstart" output -raw revision)"
echo "    status:   $("$terraform" -chdir="$quickstart" output -raw status)"
echo "    endpoint: $("$terraform" -chdir="$quickstart" output -raw endpoint)"
ns=occ-quickstart
k -n "$ns" get pods -l occ-platform.io/agent=assistant \
	-o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,READY:.status.containerStatuses[0].ready,IMAGE:.spec.containers[0].image' | sed 's/^/    /'
pod="$(k -n "$ns" get pods -l occ-platform.io/agent=assistant -o jsonpath='{.items[0].metadata.name}')"
echo "    the startup wrapper's model probe, from the gateway container's log:"
k -n "$ns" logs "$pod" -c gateway | grep -m 1 '"event":"openclaw.model_probe"' | sed 's/^/      /' || true

step "a second plan"
set +e
"$terraform" -chdir="$quickstart" plan -detailed-exitcode -no-color "${vars[@]}" >"$work/plan.log" 2>&1
code=$?
set -e
case "$code" in
0) echo "    second plan: no changes" ;;
2) cat "$work/plan.log" >&2; die "the second plan is NOT empty (above)" ;;
*) cat "$work/plan.log" >&2; die "the second plan failed (above)" ;;
esac

step "GET /readyz through kubectl port-forward to Service $ns/assistant"
k -n "$ns" port-forward service/assistant :18789 >"$work/port-forward.log" 2>&1 &
pf_pid=$!
stop_pf() { if [ -n "${pf_pid:-}" ]; then kill "$pf_pid" 2>/dev/null || true; wait "$pf_pid" 2>/dev/null || true; pf_pid=""; fi; }
trap stop_pf EXIT
port=""
for _ in $(seq 1 100); do
	port="$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) -> .*/\1/p' "$work/port-forward.log" | head -n 1)"
	[ -n "$port" ] && break
	kill -0 "$pf_pid" 2>/dev/null || break
	sleep 0.1
done
[ -n "$port" ] || { cat "$work/port-forward.log" >&2; die "kubectl port-forward did not start (above)"; }
echo "    kubectl port-forward (pid $pf_pid): 127.0.0.1:$port -> service/assistant:18789"
echo "    \$ curl -sS http://127.0.0.1:$port/readyz"
readyz="$(curl -sS --max-time 10 -w '\n(HTTP %{http_code})' "http://127.0.0.1:$port/readyz")" ||
	{ cat "$work/port-forward.log" >&2; die "GET /readyz failed"; }
printf '%s\n' "$readyz" | sed 's/^/    /'

step "a turn: one message through the same port-forward, to the gateway's chat completions endpoint"
# The gateway token is the Agent's own Secret (the provider made it; it is
# in no state); the gateway runs the message as any client's turn, and its
# built-in harness calls the model with the Agent's key.
gateway_token="$(k -n "$ns" get secret assistant-gateway-token -o jsonpath='{.data.token}' | base64 -d)"
[ -n "$gateway_token" ] || die "the Agent's gateway token Secret $ns/assistant-gateway-token has no token"
echo "    \$ curl -sS http://127.0.0.1:$port/v1/chat/completions -H 'Authorization: Bearer <the gateway token>' \\"
echo "        -d '{\"model\":\"openclaw/default\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]}'"
t_turn=$(date +%s%N)
answer_json="$(curl -sS --max-time 120 -H "Authorization: Bearer $gateway_token" -H 'Content-Type: application/json' \
	-d '{"model":"openclaw/default","messages":[{"role":"user","content":"Say hello."}]}' \
	-w '\n%{http_code}' "http://127.0.0.1:$port/v1/chat/completions")" || { cat "$work/port-forward.log" >&2; die "the turn failed"; }
unset gateway_token
turn_ms=$((($(date +%s%N) - t_turn) / 1000000))
status="${answer_json##*$'\n'}"
answer_json="${answer_json%$'\n'*}"
[ "$status" = 200 ] || { printf '%s\n' "$answer_json" >&2; die "the gateway answered the turn with HTTP $status"; }
answer="$(printf '%s' "$answer_json" | sed -n 's/.*"message":{[^}]*"content":"\([^"]*\)".*/\1/p')"
[ -n "$answer" ] || { printf '%s\n' "$answer_json" >&2; die "the gateway's answer holds no message"; }
echo "    the agent answered in ${turn_ms} ms: $answer"
[ "$local_cluster" = 1 ] && echo "    (the local fake model's words, through the real gateway and its built-in harness)"
stop_pf

step "a plan the provider refuses: the quickstart without its harness line"
mkdir -p "$work/refused"
cp "$quickstart"/main.tf "$quickstart"/openclaw.json5.tftpl "$work/refused/"
grep -v '^[[:space:]]*harness[[:space:]]*=[[:space:]]*"openclaw"' "$quickstart/main.tf" >"$work/refused/main.tf"
[ "$(wc -l <"$work/refused/main.tf")" -eq "$(($(wc -l <"$quickstart/main.tf") - 1))" ] ||
	die "examples/quickstart/main.tf no longer has one harness = \"openclaw\" line to remove"
echo "    (in ${work#"$root"/}/refused: main.tf without  harness = \"openclaw\")"
set +e
"$terraform" -chdir="$work/refused" plan -no-color "${vars[@]}" >"$work/refused.log" 2>&1
code=$?
set -e
[ "$code" -ne 0 ] || { cat "$work/refused.log" >&2; die "the plan without harness was not refused"; }
# The diagnostic: from its Error line to the end of its box.
sed -n '/^Error: /,/^╵/p' "$work/refused.log" | sed '/^╵/d; s/^│ \{0,1\}//' | sed 's/^/    /'
grep -q 'MR5' "$work/refused.log" || die "the refusal does not name rule MR5 (see $work/refused.log)"

step "a plan the cluster refuses: an agent asking 64 CPUs beside the quickstart's (the plan's preflight)"
# Admission allows it; the plan's preflight dry-runs its Pod in namespace
# occ-quickstart (the API server places it, as it would the Deployment's),
# finds no node of that placement with room, and refuses with the code the
# apply would hold. It is only planned: nothing of it is written.
mkdir -p "$work/too-big"
cp "$quickstart/openclaw.json5.tftpl" "$work/too-big/"
cat >"$work/too-big/main.tf" <<'HCL'
# make demo: an agent that asks more CPU than any node of its namespace has.
terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

variable "kube_context" {
  type    = string
  default = null
}

variable "model_base_url" {
  type    = string
  default = null
}

variable "openai_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

provider "occ" {
  kubernetes = { config_context = var.kube_context }
}

resource "occ_compute" "too_big" {
  name = "too-big"
  kubernetes = {
    namespace = "occ-quickstart"
    cpu_limit = "64"
  }
}

resource "occ_configuration" "too_big" {
  name     = "too-big"
  document = templatefile("${path.module}/openclaw.json5.tftpl", { model_base_url = var.model_base_url })
}

resource "occ_credential_source" "too_big" {
  name             = "too-big"
  compute          = occ_compute.too_big
  method           = "api_key"
  value_wo         = var.openai_api_key
  value_wo_version = 1
}

resource "occ_agent" "too_big" {
  name          = "too-big"
  compute       = occ_compute.too_big
  configuration = occ_configuration.too_big
  harness       = "openclaw"
  harness_auth  = { source = occ_credential_source.too_big }
}
HCL
echo "    (in ${work#"$root"/}/too-big: agent too-big, cpu_limit = \"64\", in namespace occ-quickstart)"
set +e
"$terraform" -chdir="$work/too-big" plan -no-color "${vars[@]}" >"$work/too-big.log" 2>&1
code=$?
set -e
[ "$code" -ne 0 ] || { cat "$work/too-big.log" >&2; die "the plan of an agent no node can hold was not refused"; }
sed -n '/^Error: /,/^╵/p' "$work/too-big.log" | sed '/^╵/d; s/^│ \{0,1\}//' | sed 's/^/    /'
grep -q 'UNSCHEDULABLE' "$work/too-big.log" || die "the refusal does not hold UNSCHEDULABLE (see $work/too-big.log)"
left="$(k -n "$ns" get all,configmaps,secrets -l occ-platform.io/agent=too-big -o name 2>/dev/null)"
[ -z "$left" ] || die "the refused plan wrote to the cluster: $left"
echo "    nothing was written: namespace $ns holds no object of agent too-big"

step "a held failure: the same Agent with a wrong key, in namespace occ-demo-wrong-key (the quickstart's keeps running)"
mkdir -p "$work/wrong-key"
cp "$quickstart/openclaw.json5.tftpl" "$work/wrong-key/"
cat >"$work/wrong-key/main.tf" <<'HCL'
# make demo: the quickstart's Agent with a key the model refuses, in a
# namespace of its own.
terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}

variable "kube_context" {
  type    = string
  default = null
}

variable "model_base_url" {
  type    = string
  default = null
}

variable "openai_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

provider "occ" {
  kubernetes = { config_context = var.kube_context }
}

resource "occ_compute" "wrong_key" {
  name = "wrong-key"
  kubernetes = {
    namespace = "occ-demo-wrong-key"
    cpu_limit = "1"
  }
}

resource "occ_configuration" "wrong_key" {
  name     = "wrong-key"
  document = templatefile("${path.module}/openclaw.json5.tftpl", { model_base_url = var.model_base_url })
}

resource "occ_credential_source" "wrong_key" {
  name             = "wrong-key"
  compute          = occ_compute.wrong_key
  method           = "api_key"
  value_wo         = var.openai_api_key
  value_wo_version = 1
}

resource "occ_agent" "wrong_key" {
  name          = "wrong-key"
  compute       = occ_compute.wrong_key
  configuration = occ_configuration.wrong_key
  harness       = "openclaw"
  harness_auth  = { source = occ_credential_source.wrong_key }
  timeouts      = { create = "5m" }
}
HCL
if [ -f "$work/wrong-key/terraform.tfstate" ]; then
	"$terraform" -chdir="$work/wrong-key" destroy -auto-approve -no-color "${vars[@]}" >"$work/wrong-key-destroy.log" 2>&1 || {
		cat "$work/wrong-key-destroy.log" >&2
		die "destroying the previous run's wrong-key Agent failed (above)"
	}
fi
t0=$SECONDS
set +e
TF_VAR_openai_api_key="$wrong_key" "$terraform" -chdir="$work/wrong-key" apply -auto-approve -no-color "${vars[@]}" >"$work/wrong-key.log" 2>&1
code=$?
set -e
[ "$code" -ne 0 ] || { cat "$work/wrong-key.log" >&2; die "the apply with a wrong key succeeded"; }
sed -n '/^Error: /,/^╵/p' "$work/wrong-key.log" | sed '/^╵/d; s/^│ \{0,1\}//' | sed 's/^/    /'
grep -q '^Error: AUTHENTICATION_FAILED' "$work/wrong-key.log" ||
	die "the apply with a wrong key did not fail with AUTHENTICATION_FAILED (see $work/wrong-key.log)"
grep -q 'providerCode 401' "$work/wrong-key.log" || die "the diagnostic has no providerCode 401 (see $work/wrong-key.log)"
step "failed in $((SECONDS - t0)) s, held: the revision was not activated, its gateway Pod stays unready"
k -n occ-demo-wrong-key get pods -l occ-platform.io/agent=wrong-key \
	-o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,READY:.status.containerStatuses[0].ready' | sed 's/^/    /'
if k -n occ-demo-wrong-key get service wrong-key >/dev/null 2>&1; then
	die "the wrong-key Agent has a Service: a held revision was activated"
fi
echo "    no Service occ-demo-wrong-key/wrong-key: nothing routes to it"
if grep -q "$model_key" "$work"/*.log || grep -q "$model_key" "$quickstart/terraform.tfstate" "$work/wrong-key/terraform.tfstate" 2>/dev/null; then
	die "a key is in the demo's logs or state"
fi
if grep -q "$wrong_key" "$work"/*.log "$work/wrong-key/terraform.tfstate" 2>/dev/null; then
	die "the wrong key is in the demo's logs or state"
fi
echo "    neither key is in the state files or in the output above"

# The destroy commands need the same provider build, kubeconfig and
# context; a destroy sends no key, so the (required) key variable gets a
# placeholder.
env_for_destroy="TF_CLI_CONFIG_FILE=${TF_CLI_CONFIG_FILE:-}"
if [ -n "${KUBE_CONFIG_PATH:-}" ]; then
	env_for_destroy+=" KUBE_CONFIG_PATH=$KUBE_CONFIG_PATH"
else
	env_for_destroy+=" KUBECONFIG=$KUBECONFIG"
fi
destroy_vars="-var kube_context=$context -var openai_api_key=unused"
step "done. The quickstart's Agent keeps running. Destroy both with:"
echo "    $env_for_destroy $terraform -chdir=$quickstart destroy -auto-approve $destroy_vars"
echo "    $env_for_destroy $terraform -chdir=$work/wrong-key destroy -auto-approve $destroy_vars"
if [ "$local_cluster" = 1 ]; then
	echo "  then stop the local cluster (its real node, containers and network namespace) with: make cluster-down"
fi
