#!/usr/bin/env bash
# scripts/release-snapshot.sh GORELEASER: what a tag publishes, made offline
# and unsigned into dist/, then checked (make release-check, .ci/run).
#
# goreleaser runs the release pipeline of .goreleaser.yml as a tag does
# (build, archive, checksums with the registry manifest) with --snapshot
# (nothing published) and --skip=sign (no GPG key here). Only the build
# matrix differs: every platform is a whole compile of the provider (about
# two minutes each, cold, on 2 cores), so the snapshot builds this
# machine's and one of each other operating system (SNAPSHOT_TARGETS),
# from a copy of the configuration whose goos/goarch/ignore is replaced by
# that list; every other line is the release's. The archives of the other
# platforms come from the same templates.
#
# Checked: the archives are the names a tag gives them, each holds the
# binary the registries expect (with goreleaser's default README.md,
# LICENSE and CHANGELOG.md); SHA256SUMS lists every archive and the
# registry manifest (uploaded from terraform-registry-manifest.json) with
# their true digests; the binary is stamped with the runtime
# image digests it was given (OCC_OPENCLAW_IMAGE_DIGEST,
# OCC_CODEX_IMAGE_DIGEST); and prints the names a tag publishes for every
# platform of the release's matrix.
set -euo pipefail
gr="${1:?usage: release-snapshot.sh GORELEASER}"
case "$gr" in /*) ;; *) gr="$PWD/$gr" ;; esac
cd "$(dirname "$0")/.."

SNAPSHOT_TARGETS=(linux_amd64 windows_amd64 darwin_arm64 freebsd_amd64)
project=terraform-provider-occ
die() {
	echo "release-snapshot: $*" >&2
	exit 1
}

# The release's matrix (goos x goarch less ignore, less what Go cannot build,
# as goreleaser leaves it out), read from the one build of .goreleaser.yml:
# "OS ARCH" lines.
matrix() {
	awk '
		/^builds:/ { inb = 1; next }
		inb && /^[^ #]/ { inb = 0 }
		!inb { next }
		/^    goos:/ { list = "os"; next }
		/^    goarch:/ { list = "arch"; next }
		/^    ignore:/ { list = "ign"; next }
		/^    [a-z_]+:/ { list = "" }
		list == "os" && /^      - / { os[++nos] = $2 }
		list == "arch" && /^      - / { gsub(/"/, "", $2); arch[++narch] = $2 }
		list == "ign" && /goos:/ { io = $NF }
		list == "ign" && /goarch:/ { gsub(/"/, "", $NF); ign[io " " $NF] = 1 }
		END { for (i = 1; i <= nos; i++) for (j = 1; j <= narch; j++) if (!((os[i] " " arch[j]) in ign)) print os[i], arch[j] }
	' .goreleaser.yml | grep -xF -f <(go tool dist list | tr / ' ')
}
mapfile -t all < <(matrix)
[ "${#all[@]}" -gt 0 ] || die ".goreleaser.yml: no goos/goarch matrix in its build"
for t in "${SNAPSHOT_TARGETS[@]}"; do
	printf '%s\n' "${all[@]}" | grep -qx "${t/_/ }" || die "$t is not a platform of the release (.goreleaser.yml)"
done

# The configuration with the snapshot's targets in place of the matrix.
mkdir -p .dev
cfg=.dev/goreleaser-snapshot.yml
awk -v targets="${SNAPSHOT_TARGETS[*]}" '
	/^builds:/ { inb = 1 }
	inb && /^[^ #]/ && !/^builds:/ { inb = 0 }
	inb && /^    (goos|goarch|ignore):/ {
		if (!done) { n = split(targets, t, " "); print "    targets:"; for (i = 1; i <= n; i++) print "      - " t[i]; done = 1 }
		skip = 1; next
	}
	skip && /^      / { next }
	{ skip = 0; print }
' .goreleaser.yml >"$cfg"
grep -q '^    targets:' "$cfg" || die "could not replace the build matrix in $cfg"

"$gr" release --snapshot --clean --skip=sign --config "$cfg"

version=$(jq -er .version dist/metadata.json)
sums="dist/${project}_${version}_SHA256SUMS"
manifest="${project}_${version}_manifest.json"
[ -f "$sums" ] || die "no $sums"
# The manifest is uploaded from the repository (release.extra_files), not
# written to dist/: its line in SHA256SUMS must be that file's digest.
grep -qxF "$(sha256sum <terraform-registry-manifest.json | cut -c1-64)  $manifest" "$sums" ||
	die "$sums has no line for $manifest with the digest of terraform-registry-manifest.json"

listed=$(awk '{ print $2 }' "$sums" | LC_ALL=C sort)
want=$(
	for t in "${SNAPSHOT_TARGETS[@]}"; do echo "${project}_${version}_${t}.zip"; done
	echo "$manifest"
)
want=$(LC_ALL=C sort <<<"$want")
[ "$listed" = "$want" ] || die "$sums lists:
$listed
want:
$want"
(cd dist && grep -vF "  $manifest" "$(basename "$sums")" | sha256sum --quiet -c -) || die "$sums does not match the archives"

for t in "${SNAPSHOT_TARGETS[@]}"; do
	zip="dist/${project}_${version}_${t}.zip"
	bin="${project}_v${version}"
	[ "${t%%_*}" = windows ] && bin="$bin.exe"
	got=$(unzip -Z1 "$zip" | LC_ALL=C sort | paste -sd' ')
	want=$(printf '%s\n' "$bin" CHANGELOG.md LICENSE README.md | LC_ALL=C sort | paste -sd' ')
	[ "$got" = "$want" ] || die "$zip holds '$got', want '$want'"
done

linux_bin=$(ls dist/*linux_amd64*/"${project}_v${version}")
for d in "${OCC_OPENCLAW_IMAGE_DIGEST:-}" "${OCC_CODEX_IMAGE_DIGEST:-}"; do
	[ -z "$d" ] || grep -qaF "$d" "$linux_bin" || die "$linux_bin is not stamped with $d"
done

echo "release-snapshot: $(wc -l <"$sums") files in $(basename "$sums"), checked; the archives built here:"
awk '{ print "  " $2 }' "$sums"
echo "release-snapshot: the archives a tag publishes (${#all[@]} platforms):"
for p in "${all[@]}"; do echo "  ${project}_VERSION_${p/ /_}.zip"; done
