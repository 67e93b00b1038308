# Real backends for the acceptance tests: Kubernetes (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) and OpenTofu, built once
# from the Go module proxy by testenv/build.sh into a cache outside the
# repository. Included from the GNUmakefile.

# The cache (binaries keyed by version, and current/ with stable names);
# package internal/testenv/kube reads the same variable.
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE
TESTENV_BIN := $(OCC_TESTENV_CACHE)/current
TOFU        ?= $(TESTENV_BIN)/tofu

CLUSTER_DIR := $(DEV_DIR)/cluster
CLUSTER_CMD := $(DEV_DIR)/bin/occ-kube-cluster

.PHONY: testenv-kube testenv-tofu testenv-kubectl cluster cluster-up cluster-down testacc-tofu

testenv-kube: ## Build etcd, kube-apiserver, -controller-manager, -scheduler and kwok once (about 9 min cold on 2 cores).
	testenv/build.sh kube

testenv-tofu: ## Build OpenTofu once (about 3 min cold).
	testenv/build.sh tofu

testenv-kubectl: ## Build kubectl once (optional; for poking at make cluster-up).
	testenv/build.sh kubectl

$(CLUSTER_CMD): FORCE
	go build -o $@ ./internal/testenv/kube/cmd/occ-kube-cluster

cluster: testenv-kube $(CLUSTER_CMD) ## Start a cluster in the foreground and print its kubeconfig; Ctrl-C stops it.
	$(CLUSTER_CMD) -dir $(CLUSTER_DIR)

cluster-up: testenv-kube $(CLUSTER_CMD) ## Start a cluster in the background (stop it with make cluster-down).
	@mkdir -p $(CLUSTER_DIR)
	@if [ -f $(CLUSTER_DIR)/pid ] && kill -0 "$$(cat $(CLUSTER_DIR)/pid)" 2>/dev/null; then \
		echo "cluster-up: already running (pid $$(cat $(CLUSTER_DIR)/pid)); export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig"; \
		exit 0; \
	fi; \
	rm -f $(CLUSTER_DIR)/kubeconfig; \
	nohup $(CLUSTER_CMD) -dir $(CLUSTER_DIR) > $(CLUSTER_DIR)/cluster.log 2>&1 < /dev/null & \
	pid=$$!; echo $$pid > $(CLUSTER_DIR)/pid; \
	for _ in $$(seq 1 1200); do \
		if [ -f $(CLUSTER_DIR)/kubeconfig ]; then cat $(CLUSTER_DIR)/cluster.log; exit 0; fi; \
		if ! kill -0 $$pid 2>/dev/null; then \
			echo "cluster-up: the cluster did not start:" >&2; cat $(CLUSTER_DIR)/cluster.log >&2; \
			rm -f $(CLUSTER_DIR)/pid; exit 1; \
		fi; \
		sleep 0.1; \
	done; \
	echo "cluster-up: not ready after 120 s; see $(CLUSTER_DIR)/cluster.log" >&2; exit 1

cluster-down: ## Stop the cluster of make cluster-up and remove its data.
	@if [ ! -f $(CLUSTER_DIR)/pid ]; then echo "cluster-down: no cluster running"; exit 0; fi; \
	pid=$$(cat $(CLUSTER_DIR)/pid); \
	if kill -TERM $$pid 2>/dev/null; then \
		while kill -0 $$pid 2>/dev/null; do sleep 0.2; done; \
		echo "cluster-down: stopped (pid $$pid)"; \
	else \
		echo "cluster-down: pid $$pid was not running"; \
	fi; \
	rm -f $(CLUSTER_DIR)/pid

# The acceptance tests once more with the built OpenTofu instead of
# Terraform. OpenTofu reattaches to the in-process provider only under a
# real namespace (the legacy "-" one fails), hence
# TF_ACC_PROVIDER_NAMESPACE.
testacc-tofu: devconfig testenv-tofu ## Acceptance tests with OpenTofu (TF_ACC_TERRAFORM_PATH=built tofu).
	TF_ACC=1 TF_ACC_TERRAFORM_PATH="$(TOFU)" TF_ACC_PROVIDER_NAMESPACE=hashicorp \
	TF_CLI_CONFIG_FILE="$(TF_TEST_CONFIG)" \
		go test $(TEST) -count=1 -timeout $(TEST_TIMEOUT) -run 'TestAcc' -v $(TESTARGS)

FORCE:
