#!/usr/bin/env bash
# make demo: apply examples/quickstart to Kubernetes and show that a second
# plan is empty. Without KUBECONFIG / KUBE_CONFIG_PATH, a local control plane
# with simulated nodes is started first (make cluster-up; stop it with make
# cluster-down). What is simulated: the nodes and the runtime (kwok marks the
# Pods Ready, standing in for a successful startup probe); the API server,
# etcd, controller manager, scheduler and everything the provider does are real.
set -euo pipefail
cd "$(dirname "$0")/.."
terraform="${TERRAFORM:-terraform}"

if [ -z "${KUBECONFIG:-}" ] && [ -z "${KUBE_CONFIG_PATH:-}" ]; then
	echo "==> no KUBECONFIG given: starting the local cluster (make cluster-up)"
	make --no-print-directory cluster-up
	export KUBECONFIG="$PWD/.dev/cluster/kubeconfig"
fi
echo "==> using kubeconfig ${KUBECONFIG:-$KUBE_CONFIG_PATH}"

# The key is simulated: no model is called, kwok plays the runtime.
vars=(-input=false -var "openai_api_key=sk-demo-simulated-not-a-real-key")
cd examples/quickstart
echo "==> terraform apply"
"$terraform" apply -auto-approve "${vars[@]}"
echo "==> activated"
"$terraform" output -raw revision | sed 's/^/revision: /'
echo
"$terraform" output -raw endpoint | sed 's/^/endpoint: /'
echo
echo "==> a second plan"
set +e
"$terraform" plan -detailed-exitcode "${vars[@]}" >/dev/null
code=$?
set -e
case "$code" in
0) echo "second plan: no changes" ;;
2) echo "second plan is NOT empty:" >&2; "$terraform" plan "${vars[@]}" >&2; exit 1 ;;
*) echo "second plan failed" >&2; exit 1 ;;
esac
# The destroy command must find the same provider build and cluster: print
# the environment it needs, as absolute paths.
env_for_destroy="TF_CLI_CONFIG_FILE=${TF_CLI_CONFIG_FILE:-}"
if [ -n "${KUBECONFIG:-}" ]; then
	env_for_destroy+=" KUBECONFIG=$KUBECONFIG"
else
	env_for_destroy+=" KUBE_CONFIG_PATH=$KUBE_CONFIG_PATH"
fi
echo "==> done. Destroy with: (cd $PWD && $env_for_destroy $terraform destroy -auto-approve ${vars[*]}); stop the cluster with: make cluster-down"
