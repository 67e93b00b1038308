#!/usr/bin/env bash
# Usage: scripts/validate-examples.sh [EXAMPLES_DIR]
#
# Runs `terraform validate` in every directory under EXAMPLES_DIR (default
# examples) that holds .tf files, against the provider in bin/ through the
# dev_overrides CLI configuration that `make validate-examples` exports as
# TF_CLI_CONFIG_FILE. No `terraform init` is needed (nor possible offline):
# Terraform takes dev-overridden providers as they are, and the built-in
# terraform_data needs nothing. Local modules are installed with
# `terraform get`, which touches no registry.
#
# Directories that declare no required_providers (the per-resource snippets
# tfplugindocs embeds in docs/) are validated in a copy under .dev/ with a
# generated file declaring occ = occ-platform/occ, because their implicit
# provider address (hashicorp/occ) does not exist.
#
# Every directory is checked; the script fails at the end if any failed.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
examples="${1:-examples}"
terraform="${TERRAFORM:-terraform}"
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

if [ -z "${TF_CLI_CONFIG_FILE:-}" ] || ! grep -q 'dev_overrides' "${TF_CLI_CONFIG_FILE}" 2>/dev/null; then
	echo "error: TF_CLI_CONFIG_FILE must name the dev_overrides CLI config; run 'make validate-examples'." >&2
	exit 1
fi
if [ ! -d "$examples" ]; then
	echo "validate-examples: no ${examples}/ directory; nothing to validate"
	exit 0
fi

mapfile -t dirs < <(find "$examples" \( -name '*.tf' -o -name '*.tfquery.hcl' \) -not -path '*/.terraform/*' -exec dirname {} \; | sort -u)
if [ "${#dirs[@]}" -eq 0 ]; then
	echo "validate-examples: no .tf files under ${examples}/"
	exit 0
fi

scratch="${root}/.dev/validate-examples"
rm -rf "$scratch"
mkdir -p "$scratch"

# validate WORKDIR: terraform get (for local modules) and validate; the
# output is in $out.
validate() {
	local workdir="$1"
	out=""
	if grep -Eqs '^[[:space:]]*module[[:space:]]+"' "$workdir"/*.tf; then
		out="$("$terraform" -chdir="$workdir" get -no-color 2>&1)" || return 1
	fi
	# -no-color keeps CI logs readable; the dev_overrides warning is expected.
	# -query: list blocks (*.tfquery.hcl, Terraform 1.14) are validated too.
	local query=()
	if compgen -G "$workdir/*.tfquery.hcl" >/dev/null; then
		query=(-query)
	fi
	out="$("$terraform" -chdir="$workdir" validate -no-color "${query[@]}" 2>&1)"
}

failed=()
for dir in "${dirs[@]}"; do
	# A snippet directory may hold one import example per way of importing
	# (import-by-string-id.tf, import-by-identity.tf), each an import block
	# for the same address: Terraform allows one, so each is validated in a
	# copy of its own, without the others.
	variants=("")
	if ! grep -qs 'required_providers' "$dir"/*.tf; then
		mapfile -t imports < <(cd "$dir" && ls import-by-*.tf 2>/dev/null || true)
		if [ "${#imports[@]}" -gt 1 ]; then
			variants=("${imports[@]}")
		fi
	fi
	for variant in "${variants[@]}"; do
		workdir="$dir"
		how="in place"
		if ! grep -qs 'required_providers' "$dir"/*.tf; then
			workdir="${scratch}/${dir//\//__}${variant:+__${variant%.tf}}"
			mkdir -p "$workdir"
			cp -R "$dir"/. "$workdir"/
			if [ -n "$variant" ]; then
				for other in "${imports[@]}"; do
					[ "$other" = "$variant" ] || rm -f "$workdir/$other"
				done
			fi
			cat >"$workdir/zz_validate_providers.tf" <<'HCL'
# Added by scripts/validate-examples.sh: the snippet declares no provider source.
terraform {
  required_providers {
    occ = {
      source = "occ-platform/occ"
    }
  }
}
HCL
			how="as a snippet${variant:+ with ${variant}}, in ${workdir#"$root"/}"
		fi

		echo "==> ${dir} (${how})"
		if validate "$workdir"; then
			echo "    ok"
			# Show warnings other than the expected dev_overrides one.
			if [ "$(grep -c '^Warning:' <<<"$out" || true)" -gt 1 ]; then
				printf '%s\n' "$out" | sed 's/^/    /'
			fi
		else
			printf '%s\n' "${out:-}" | sed 's/^/    /'
			failed+=("$dir${variant:+ ($variant)}")
		fi
		out=""
	done
done

if [ "${#failed[@]}" -gt 0 ]; then
	echo "validate-examples: ${#failed[@]} of ${#dirs[@]} example directories failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "validate-examples: ${#dirs[@]} example directories valid"
