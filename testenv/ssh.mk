# SSH test hosts (issue 3): included by the GNUmakefile.
#
#   make testenv-ssh   apt packages (openssh-server, systemd-container,
#                      debootstrap) and the cached bookworm rootfs with systemd,
#                      sshd, the `occ` operator and OpenClaw under /opt/openclaw,
#                      in $(OCC_TESTENV_CACHE)/rootfs/ (outside the repo).
#                      A no-op when all is present (under 1 s); cold 4 to 7
#                      minutes on 2 cores (debootstrap 2 to 5, npm 1 to 2).
#
# internal/testenv/sshhost boots that rootfs with systemd-nspawn and runs the
# plain sshd fixture.

TESTENV_SSH_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
OCC_TESTENV_CACHE ?= $(HOME)/.cache/occ-testenv
export OCC_TESTENV_CACHE

.PHONY: testenv-ssh testenv-ssh-clean

testenv-ssh: ## SSH test hosts: apt packages and the cached nspawn rootfs (with OpenClaw).
	bash $(TESTENV_SSH_DIR)/ssh.sh

testenv-ssh-clean: ## Remove the cached nspawn rootfs (the next testenv-ssh rebuilds it).
	rm -rf $(OCC_TESTENV_CACHE)/rootfs

# The SSH demo (issue 5): examples/quickstart-ssh applied to a booted host.
.PHONY: demo-ssh
demo-ssh: export TF_CLI_CONFIG_FILE := $(TF_DEV_CONFIG)
demo-ssh: build devconfig check-terraform testenv-ssh ## Apply examples/quickstart-ssh to a systemd host (nspawn, real OpenClaw); print the revision; show the second plan is empty.
	TERRAFORM="$(TERRAFORM)" scripts/demo-ssh.sh
