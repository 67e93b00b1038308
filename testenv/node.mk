# The real node of the test environment (issue 11): included by the
# GNUmakefile.
#
#   make testenv-node  the Debian packages the real node runs: containerd
#                      1.6 and runc (the container runtime), the CNI plugins
#                      (bridge, host-local, loopback, portmap), iptables and
#                      conntrack (kube-proxy), iproute2 and util-linux (the
#                      network namespace and nsenter). kubelet, kube-proxy and
#                      CoreDNS are built by testenv-kube; the images by
#                      `make images`. A no-op when installed (under 1 s).
#
# internal/testenv/kubeenv/node.go starts the node (containerd, kubelet,
# kube-proxy, CoreDNS in a network namespace of its own) for the tests that
# ask for it, and for `make cluster-up REAL_NODE=1`.

TESTENV_NODE_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
NODE_APT_PACKAGES := containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux

.PHONY: testenv-node

testenv-node: ## The real node's Debian packages (containerd, runc, CNI plugins, iptables, conntrack).
	bash $(TESTENV_NODE_DIR)/apt.sh $(NODE_APT_PACKAGES)
