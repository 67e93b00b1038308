#!/usr/bin/env bash
# testenv/apt.sh PACKAGE...: installs the Debian packages that are missing
# (dpkg-query first, so a warm run is a no-op of well under a second).
# apt-get is retried while another apt holds its lock: make testenv runs
# several installers side by side. Needs root.
set -euo pipefail

log() { printf 'testenv-apt: %s\n' "$*"; }
missing=()
for p in "$@"; do
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
	log "present: $*"
	exit 0
fi
log "installing: ${missing[*]}"
aptlog=$(mktemp)
trap 'rm -f "$aptlog"' EXIT
for try in 1 2 3 4 5 6 7 8 9 10; do
	if { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1; then
		log "installed: ${missing[*]}"
		exit 0
	fi
	grep -qi 'lock' "$aptlog" || break
	log "apt is busy (try $try); waiting"
	sleep 10
done
tail -n 30 "$aptlog" >&2
echo "testenv-apt: FAILED: apt-get install ${missing[*]} (log tail above)" >&2
exit 1
