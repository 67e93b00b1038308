#!/usr/bin/env bash
# Usage: scripts/check-terraform.sh [CLI] [MIN_VERSION]
#
# Succeeds, printing the CLI and its version, when CLI (a name looked up on
# PATH, or a path; default "terraform") runs and reports a version >=
# MIN_VERSION (default 1.11.0). Otherwise fails with a message that says what
# to do. OpenTofu is accepted too (`tofu version` reports its own version).
# Nothing is downloaded: terraform-plugin-testing would try to, and fail,
# on machines without internet access.
set -euo pipefail

cli="${1-terraform}"
min="${2:-1.11.0}"

fail() {
	{
		echo "error: $*"
		echo "       Terraform >= ${min} (or OpenTofu >= ${min}) is required: write-only attributes need it."
		echo "       Install it on PATH, or point TERRAFORM / TF_ACC_TERRAFORM_PATH at the binary."
	} >&2
	exit 1
}

[ -n "$cli" ] || fail "terraform not found on PATH"
path="$(command -v -- "$cli" 2>/dev/null || true)"
if [ -z "$path" ] || [ ! -x "$path" ]; then
	fail "'${cli}' not found (PATH=${PATH})"
fi

# First line: "Terraform v1.11.4" or "OpenTofu v1.12.6". CHECKPOINT_DISABLE
# keeps terraform from asking the network whether it is outdated.
first_line="$(CHECKPOINT_DISABLE=1 "$path" version </dev/null 2>/dev/null | head -n 1 || true)"
version="$(printf '%s\n' "$first_line" | sed -nE 's/^[A-Za-z]+ v([0-9]+\.[0-9]+\.[0-9]+).*/\1/p')"
[ -n "$version" ] || fail "could not read a version from '${path} version' (got: ${first_line:-nothing})"

lowest="$(printf '%s\n%s\n' "$min" "$version" | sort -V | head -n 1)"
[ "$lowest" = "$min" ] || fail "${path} is version ${version}, older than ${min}"

echo "${first_line%% *} ${version} at ${path}"
