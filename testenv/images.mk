# Runtime images (issues 11, 25): included by the GNUmakefile.
#
#   make images        OCI image archives for this machine (amd64), built
#                      here without a container builder (apt and dpkg-deb
#                      for the Debian root file system, umoci, skopeo) by
#                      testenv/images.sh, under $(OCC_TESTENV_CACHE)/images/:
#                        ghcr.io/occ-platform/runtime/openclaw:2026.9.6
#                        ghcr.io/occ-platform/runtime/codex:0.169.0
#                        localhost/occ-testenv/pause:1 (containerd's sandbox_image)
#                      the default names occ_compute renders. Needs the npm
#                      runtimes (testenv-runtimes, a prerequisite) and root.
#                      Measured cold on 2 cores beside the rest of make
#                      testenv: 5 minutes (the Debian packages and root file
#                      system 80 s, openclaw's layers 135 s, codex's 19 s);
#                      a no-op when present (a few seconds); a changed
#                      wrapper (cmd/occ-runtime and what it imports) rebuilds
#                      in about 1 minute.
#   make images-arm64  the runtime images for linux/arm64, assembled here
#                      without emulation (the npm packages for arm64, the
#                      Debian packages for arm64, the wrapper cross-compiled).
#                      Measured cold the same way: 9 minutes (the npm
#                      installs 3, the root file system 2, the wrapper 1.5,
#                      the layers 2.5).
#   make images-index  both platforms of each runtime image as one OCI archive
#                      holding a multi-platform image index (what a release
#                      pushes); `testenv/images.sh index-digest NAME` its digest.
#   make images-sizes  each image's compressed size, by layer.
#   make images-check  imports the archives into a containerd of its own and
#                      runs node, openclaw, codex, git and bwrap in them.
#
# `testenv/images.sh path openclaw|codex|pause [ARCH]` prints an archive's
# path (and fails when it is not built for the current recipe); import it with
#   ctr -n k8s.io images import "$(testenv/images.sh path openclaw)"
#
# Archive format, measured (ctr 1.6 import of all three into a fresh
# containerd, snapshots unpacked, 2 cores, two runs each; before the images
# shrank by a third in issue 25):
#   OCI, gzip layers (default)  0.55 GB   first import 16.4-16.7 s,
#                                         re-import of present images 3.2-3.8 s
#   Docker, plain layers        1.68 GB   first import 21.4-24.4 s,
#                                         re-import 11.5-12.1 s
# (OCC_IMAGES_LAYERS=none selects the second.)

TESTENV_IMAGES_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE

.PHONY: images images-arm64 images-index images-sizes images-check images-clean

images: testenv-runtimes ## Runtime and pause images as OCI archives (umoci, skopeo), cached outside the repo.
	bash $(TESTENV_IMAGES_DIR)/images.sh build

images-arm64: images ## The runtime images for linux/arm64, assembled without emulation.
	bash $(TESTENV_IMAGES_DIR)/images.sh build --arch arm64 openclaw codex

images-index: images-arm64 ## Each runtime image for amd64 and arm64 as one multi-platform OCI archive (what a release pushes).
	@for n in openclaw codex; do echo "$$n: $$(bash $(TESTENV_IMAGES_DIR)/images.sh index $$n) $$(bash $(TESTENV_IMAGES_DIR)/images.sh index-digest $$n)"; done

images-sizes: ## Each built image's compressed size, by layer.
	bash $(TESTENV_IMAGES_DIR)/images.sh sizes

images-check: images ## Import the image archives into a private containerd and run the runtimes' --version in them.
	bash $(TESTENV_IMAGES_DIR)/images.sh check

images-clean: ## Remove the cached image archives and their root file system.
	rm -rf $(OCC_TESTENV_CACHE)/images
