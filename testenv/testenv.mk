# Real backends for the acceptance tests: Kubernetes (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) and OpenTofu, built once
# from the Go module proxy by testenv/build.sh into a cache outside the
# repository. Included from the GNUmakefile.

# The cache (binaries keyed by version, and current/ with stable names);
# package internal/testenv/kubeenv reads the same variable.
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE
TESTENV_BIN := $(OCC_TESTENV_CACHE)/current
TOFU        ?= $(TESTENV_BIN)/tofu
# The built Terraform, newer than the machine's (testenv/build.sh).
TERRAFORM_NEW ?= $(TESTENV_BIN)/terraform

CLUSTER_DIR := $(DEV_DIR)/cluster
CLUSTER_CMD := $(DEV_DIR)/bin/occ-kube-cluster

# make cluster-up starts the control plane, the kwok nodes and the real
# node: containerd, kubelet, kube-proxy and CoreDNS in network namespace
# occ-node-N (root; make testenv-node and make images are its
# prerequisites, a no-op when built), about 20 to 40 s warm. REAL_NODE=0
# leaves the real node out (kwok only, about 6 s: Pods act out their
# runtime, no container runs). With the real node:
#   CLUSTER_PLACEMENT  where Pods of namespaces without placement
#                      annotations run (default real with the real node,
#                      else kwok);
#   CLUSTER_MODEL_KEY  the one key the local fake model endpoint accepts
#                      (default occ-demo-local-key; every other key gets 401
#                      invalid_api_key). The endpoint runs inside the node's
#                      network namespace, answers "ok" (OpenAI Responses and
#                      chat completions, Anthropic Messages), bills nothing,
#                      and its URL is OCC_TESTENV_MODEL_URL in
#                      $(CLUSTER_DIR)/cluster.env.
# CLUSTER_KCM_QPS sets the controller manager's client rate per second (burst
# twice it) instead of its default of 20 per controller (burst 30), which
# bounds how fast many Deployments get their Pods (make bench-apply).
REAL_NODE ?= 1
cluster_real := $(filter 1 yes true,$(REAL_NODE))
CLUSTER_PLACEMENT ?= $(if $(cluster_real),real,kwok)
CLUSTER_MODEL_KEY ?= occ-demo-local-key
CLUSTER_KCM_QPS ?=
CLUSTER_FLAGS := -placement $(CLUSTER_PLACEMENT)$(if $(cluster_real), -real-node -model-key $(CLUSTER_MODEL_KEY))$(if $(CLUSTER_KCM_QPS), -controller-manager-qps $(CLUSTER_KCM_QPS))
CLUSTER_PREREQS := testenv-kube $(if $(cluster_real),testenv-node images)
# How long cluster-up waits for the cluster (the real node imports the
# images into its containerd first).
CLUSTER_WAIT_S := $(if $(cluster_real),300,120)

.PHONY: testenv-kube testenv-tofu testenv-terraform testenv-kubectl cluster cluster-up cluster-down testacc-tofu testacc-new-terraform

testenv-kube: ## Build etcd, kube-apiserver, -controller-manager, -scheduler and kwok once (about 9 min cold on 2 cores).
	testenv/build.sh kube

testenv-tofu: ## Build OpenTofu and the newer Terraform once (about 3 min cold each).
	testenv/build.sh tofu

testenv-terraform: ## Build only the newer Terraform once (about 3 min cold): docs and examples use it.
	testenv/build.sh terraform

testenv-kubectl: ## Build kubectl once (optional; for poking at make cluster-up).
	testenv/build.sh kubectl

$(CLUSTER_CMD): FORCE
	go build -o $@ ./internal/testenv/kubeenv/cmd/occ-kube-cluster

cluster: $(CLUSTER_PREREQS) $(CLUSTER_CMD) ## Start a cluster in the foreground and print its kubeconfig; Ctrl-C stops it (REAL_NODE=0: kwok only).
	$(CLUSTER_CMD) -dir $(CLUSTER_DIR) $(CLUSTER_FLAGS)

# The flags of the running cluster are kept in $(CLUSTER_DIR)/flags: a
# cluster-up with other flags fails instead of handing out a cluster that
# is not the one asked for. The model key is on the command line of the
# cluster process: it is a fake endpoint's key, not a credential.
cluster-up: $(CLUSTER_PREREQS) $(CLUSTER_CMD) ## Start a cluster in the background with the real node and a local model endpoint (REAL_NODE=0: kwok only); make cluster-down stops it.
	@mkdir -p $(CLUSTER_DIR)
	@flags='$(CLUSTER_FLAGS)'; \
	if [ -f $(CLUSTER_DIR)/pid ] && kill -0 "$$(cat $(CLUSTER_DIR)/pid)" 2>/dev/null; then \
		if [ "$$(cat $(CLUSTER_DIR)/flags 2>/dev/null)" != "$$flags" ]; then \
			echo "cluster-up: a cluster with other flags is running (pid $$(cat $(CLUSTER_DIR)/pid): $$(cat $(CLUSTER_DIR)/flags 2>/dev/null)); want: $$flags. Stop it first: make cluster-down" >&2; \
			exit 1; \
		fi; \
		echo "cluster-up: already running (pid $$(cat $(CLUSTER_DIR)/pid)); export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig"; \
		exit 0; \
	fi; \
	rm -f $(CLUSTER_DIR)/kubeconfig $(CLUSTER_DIR)/cluster.env $(CLUSTER_DIR)/cluster.log; \
	nohup $(CLUSTER_CMD) -dir $(CLUSTER_DIR) $$flags > $(CLUSTER_DIR)/cluster.log 2>&1 < /dev/null & \
	pid=$$!; echo $$pid > $(CLUSTER_DIR)/pid; echo "$$flags" > $(CLUSTER_DIR)/flags; \
	for _ in $$(seq 1 $$(( $(CLUSTER_WAIT_S) * 10 ))); do \
		if grep -qs '^stop with Ctrl-C' $(CLUSTER_DIR)/cluster.log; then cat $(CLUSTER_DIR)/cluster.log; exit 0; fi; \
		if ! kill -0 $$pid 2>/dev/null; then \
			echo "cluster-up: the cluster did not start:" >&2; cat $(CLUSTER_DIR)/cluster.log >&2; \
			rm -f $(CLUSTER_DIR)/pid $(CLUSTER_DIR)/flags; exit 1; \
		fi; \
		sleep 0.1; \
	done; \
	echo "cluster-up: not ready after $(CLUSTER_WAIT_S) s (pid $$pid still running; make cluster-down stops it); see $(CLUSTER_DIR)/cluster.log" >&2; exit 1

# Stops the cluster process by its PID; it stops what it started (the
# servers, and the real node with its containers, network namespace and
# cgroups) before it exits.
cluster-down: ## Stop the cluster of make cluster-up (with its real node) and remove its data.
	@if [ ! -f $(CLUSTER_DIR)/pid ]; then echo "cluster-down: no cluster running"; exit 0; fi; \
	pid=$$(cat $(CLUSTER_DIR)/pid); \
	if kill -TERM $$pid 2>/dev/null; then \
		for i in $$(seq 1 600); do kill -0 $$pid 2>/dev/null || break; sleep 0.2; done; \
		if kill -0 $$pid 2>/dev/null; then \
			echo "cluster-down: pid $$pid still stopping after 120 s; see $(CLUSTER_DIR)/cluster.log" >&2; exit 1; \
		fi; \
		echo "cluster-down: stopped (pid $$pid)"; \
	else \
		echo "cluster-down: pid $$pid was not running"; \
	fi; \
	rm -f $(CLUSTER_DIR)/pid $(CLUSTER_DIR)/flags

# The acceptance tests once more with the built OpenTofu instead of
# Terraform. OpenTofu reattaches to the in-process provider only under a
# real namespace (the legacy "-" one fails), hence
# TF_ACC_PROVIDER_NAMESPACE.
# The OpenTofu pass runs a representative subset, not every acceptance test
# twice: what depends on the CLI (write-only attributes, plan modifiers and
# unknown values, import, refusals at plan, data sources, a failed update),
# one lifecycle per compute kind, one turn on the real node and the
# sandboxed path. TOFU_TESTS=TestAcc runs them all.
TOFU_TESTS ?= ^TestAcc(Agent_(KubernetesEmbedded|SSHLifecycle|PlanShowsAdmittedRevision|UnknownInputsDeferToApply|RuleFamiliesRefuseAtPlan|SecretBindingsAndModeSwitch|HeldCodeFailsApply|SandboxedCodex|RealNodeEmbeddedTurn)|CredentialSource_WriteOnlyValue|Configuration_GenerationFollowsSemanticChanges|Compute_KubernetesLifecycle|AgentDataSource_ReadsDeployedAgent|Fault_FailedUpdateThenFix)$$
testacc-tofu: devconfig testenv-tofu ## Acceptance tests with OpenTofu (TF_ACC_TERRAFORM_PATH=built tofu), a representative subset (TOFU_TESTS).
	TF_ACC=1 TF_ACC_TERRAFORM_PATH="$(TOFU)" TF_ACC_PROVIDER_NAMESPACE=hashicorp \
	TF_CLI_CONFIG_FILE="$(TF_TEST_CONFIG)" \
		go test $(TEST) -count=1 -timeout $(TEST_TIMEOUT) -run '$(TOFU_TESTS)' -v $(TESTARGS)

# The acceptance tests of Terraform features newer than the machine's CLI
# (resource identity, list resources and `terraform query`, actions), with the
# built Terraform. Under OCC_ACC_NEW_TERRAFORM=1 they fail instead of
# skipping when the CLI lacks the feature (newTerraformPreCheck). The
# provider binary is built too: TestAccQuery_GenerateConfigPlans runs it as
# a user does, through dev_overrides, and so do the TestAccAction_ tests.
NEW_TERRAFORM_TESTS ?= TestAcc(Identity|Query|Action)_
testacc-new-terraform: build devconfig testenv-tofu ## Acceptance tests of resource identity, list resources and actions with the built Terraform 1.14.
	TF_ACC=1 OCC_ACC_NEW_TERRAFORM=1 TF_ACC_TERRAFORM_PATH="$(TERRAFORM_NEW)" \
	TF_CLI_CONFIG_FILE="$(TF_TEST_CONFIG)" \
		go test $(TEST) -count=1 -timeout $(TEST_TIMEOUT) -run '$(NEW_TERRAFORM_TESTS)' -v $(TESTARGS)

FORCE:
