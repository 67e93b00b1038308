# Runtime images (issue 11): included by the GNUmakefile.
#
#   make images        OCI image archives, built here without a container
#                      builder (debootstrap, umoci, skopeo) by
#                      testenv/images.sh, under $(OCC_TESTENV_CACHE)/images/:
#                        registry.occ-platform.io/runtime/openclaw:2026.9.6
#                        registry.occ-platform.io/runtime/codex:0.169.0
#                        localhost/occ-testenv/pause:1 (containerd's sandbox_image)
#                      the default names occ_compute renders. Needs the npm
#                      runtimes (testenv-runtimes, a prerequisite) and root.
#                      Cold about 2 minutes on 2 cores (debootstrap about 1,
#                      the layers about 1); a no-op when present (under 1 s);
#                      a changed wrapper (cmd/occ-runtime and what it
#                      imports) rebuilds in about 1 minute.
#   make images-check  imports the archives into a containerd of its own and
#                      runs node, openclaw and codex --version in them.
#
# `testenv/images.sh path openclaw|codex|pause` prints an archive's path
# (and fails when it is not built for the current recipe); import it with
#   ctr -n k8s.io images import "$(testenv/images.sh path openclaw)"
#
# Archive format, measured (ctr 1.6 import of all three into a fresh
# containerd, snapshots unpacked, 2 cores, two runs each):
#   OCI, gzip layers (default)  0.55 GB   first import 16.4-16.7 s,
#                                         re-import of present images 3.2-3.8 s
#   Docker, plain layers        1.68 GB   first import 21.4-24.4 s,
#                                         re-import 11.5-12.1 s
# (OCC_IMAGES_LAYERS=none selects the second.)

TESTENV_IMAGES_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE

.PHONY: images images-check images-clean

images: testenv-runtimes ## Runtime and pause images as OCI archives (umoci, skopeo), cached outside the repo.
	bash $(TESTENV_IMAGES_DIR)/images.sh build

images-check: images ## Import the image archives into a private containerd and run the runtimes' --version in them.
	bash $(TESTENV_IMAGES_DIR)/images.sh check

images-clean: ## Remove the cached image archives and their root file system.
	rm -rf $(OCC_TESTENV_CACHE)/images
