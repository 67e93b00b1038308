#!/usr/bin/env bash
# scripts/image-ldflags.sh: the -ldflags -X flags that stamp a development
# build with the digests of the runtime images testenv/images.sh built for
# these very sources (internal/release). An image not built for the
# current recipe is left out, and the build names it by tag alone: a
# digest of other sources would name an image the node does not have.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=github.com/occ-platform/terraform-provider-occ/internal/release
for pair in openclaw:OpenClawImageDigest codex:CodexImageDigest; do
	if digest=$(bash testenv/images.sh digest "${pair%%:*}" 2>/dev/null); then
		printf -- '-X %s.%s=%s ' "$pkg" "${pair#*:}" "$digest"
	fi
done
