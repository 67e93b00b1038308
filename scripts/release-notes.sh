#!/usr/bin/env bash
# release-notes.sh VERSION: prints CHANGELOG.md's section for VERSION (the
# lines after "## VERSION ..." up to the next "## "), for the release
# workflow. Fails when the section is missing or empty, so that no release
# goes out without notes.
set -euo pipefail
version="${1:?usage: release-notes.sh VERSION}"
cd "$(dirname "$0")/.."
notes="$(awk -v v="$version" '
	/^## / { if (found) exit; if ($2 == v) { found = 1; next } }
	found { print }
' CHANGELOG.md)"
[ -n "$(printf '%s' "$notes" | tr -d '[:space:]')" ] || { echo "release-notes.sh: CHANGELOG.md has no notes for $version" >&2; exit 1; }
printf '%s\n' "$notes"
