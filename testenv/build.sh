#!/usr/bin/env bash
# Builds the binaries of the acceptance-test environment from the Go module
# proxy, once, into a cache outside the repository:
#
#   ${OCC_TESTENV_CACHE:-$HOME/.cache/occ-testenv}/bin/<name>-<version>
#   ${OCC_TESTENV_CACHE:-$HOME/.cache/occ-testenv}/current/<name> -> ../bin/<name>-<version>
#
# Usage: testenv/build.sh [kube|tofu|all]    build what is missing (default all)
#                                            (tofu: OpenTofu and Terraform TERRAFORM_VERSION)
#        testenv/build.sh terraform          the newer Terraform alone (make generate, validate-examples)
#        testenv/build.sh kubectl            kubectl too (optional, for make cluster-up)
#        testenv/build.sh path NAME          print the cached path of NAME
#        testenv/build.sh list               print NAME VERSION PATH for each
#
# Idempotent: a binary that exists is never rebuilt (delete it to force a
# rebuild). One binary is built at a time (kube-apiserver alone peaks at about
# 2 GB of memory). Versions come from testenv/go.mod, testenv/kwok/go.mod and
# testenv/agentsandbox/go.mod
# (OpenTofu: TOFU_VERSION below), so bumping a version there is all it takes.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${OCC_TESTENV_CACHE:-$HOME/.cache/occ-testenv}"
bindir="$cache/bin"
current="$cache/current"

# OpenTofu is built inside its own downloaded module directory (its go.mod
# has a replace, so `go install …@version` refuses it); >= 1.11 is needed
# for write-only attributes.
TOFU_VERSION="v1.12.6"

# Terraform, newer than the machine's own CLI: resource identity (1.12+) and
# list resources with `terraform query` (1.14+) are proven against it
# (`make testacc-identity`). The module zip leaves out the nine remote-state
# backends that are modules of their own (s3, gcs, azurerm, consul, cos,
# kubernetes, oss, pg, oci): the build gives their replace directories an
# empty go.mod and drops them from the backend table; the tests use the
# local backend. Nothing else of Terraform is changed.
TERRAFORM_VERSION="v1.14.0"

# modversion GOMOD MODULE: the version MODULE is required at in GOMOD.
modversion() {
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) && $0 !~ /=>/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^v[0-9]/) { print $i; exit }
	}' "$1"
}

K8S_VERSION="$(modversion "$here/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(modversion "$here/go.mod" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(modversion "$here/kwok/go.mod" sigs.k8s.io/kwok)"
AGENT_SANDBOX_VERSION="$(modversion "$here/agentsandbox/go.mod" sigs.k8s.io/agent-sandbox)"
COREDNS_VERSION="$(modversion "$here/coredns/go.mod" github.com/coredns/coredns)"
for v in K8S_VERSION ETCD_VERSION KWOK_VERSION AGENT_SANDBOX_VERSION COREDNS_VERSION; do
	[ -n "${!v}" ] || { echo "testenv: cannot read ${v} from testenv/go.mod" >&2; exit 1; }
done

k8s_minor="${K8S_VERSION#v1.}"
k8s_minor="${k8s_minor%%.*}"
K8S_LDFLAGS="-s -w
 -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}
 -X k8s.io/component-base/version.gitMajor=1
 -X k8s.io/component-base/version.gitMinor=${k8s_minor}
 -X k8s.io/component-base/version.gitTreeState=clean
 -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}
 -X k8s.io/client-go/pkg/version.gitMajor=1
 -X k8s.io/client-go/pkg/version.gitMinor=${k8s_minor}
 -X k8s.io/client-go/pkg/version.gitTreeState=clean"
K8S_LDFLAGS="$(echo $K8S_LDFLAGS)" # one line

# name -> version, and the rough cold build time on 2 cores (measured).
declare -A version=(
	[kube-apiserver]="$K8S_VERSION"
	[kube-controller-manager]="$K8S_VERSION"
	[kube-scheduler]="$K8S_VERSION"
	[etcd]="$ETCD_VERSION"
	[kwok]="$KWOK_VERSION"
	[agent-sandbox-controller]="$AGENT_SANDBOX_VERSION"
	[agent-sandbox-crd]="$AGENT_SANDBOX_VERSION"
	[tofu]="$TOFU_VERSION"
	[terraform]="$TERRAFORM_VERSION"
	[kubectl]="$K8S_VERSION"
	[kubelet]="$K8S_VERSION"
	[kube-proxy]="$K8S_VERSION"
	[coredns]="$COREDNS_VERSION"
)
# Measured on 2 cores: the first figure with the machine otherwise idle
# (TESTENV.md), the second while other builds and tests ran.
declare -A eta=(
	[kube-apiserver]="4 to 6 min cold on 2 cores, up to 20 min on a busy machine"
	[kube-controller-manager]="about 1.5 min cold, up to 4 min on a busy machine"
	[kube-scheduler]="under 30 s once kube-apiserver is built"
	[etcd]="under 1 min cold"
	[kwok]="about 1.5 min cold, up to 3 min on a busy machine"
	[agent-sandbox-controller]="about 3 min cold, under 10 s warm"
	[agent-sandbox-crd]="a copy from the module"
	[tofu]="about 3 min cold, up to 15 min on a busy machine"
	[terraform]="about 3 min cold, up to 15 min on a busy machine"
	[kubectl]="about 1 min once kube-apiserver is built"
	[kubelet]="about 30 s once kube-apiserver is built"
	[kube-proxy]="about 10 s once kube-apiserver is built"
	[coredns]="about 1 min cold"
)
kube_names=(kube-apiserver etcd kube-controller-manager kube-scheduler kwok agent-sandbox-controller agent-sandbox-crd kubelet kube-proxy coredns)
tofu_names=(tofu terraform)

path_of() { echo "$bindir/$1-${version[$1]}"; }

export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=readonly -trimpath"
# Built binaries are reproducible from go.sum; the toolchain is the local one.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

build_one() { # NAME OUTFILE
	local name="$1" out="$2"
	case "$name" in
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy)
		go -C "$here" build -ldflags "$K8S_LDFLAGS" -o "$out" "k8s.io/kubernetes/cmd/$name"
		;;
	etcd)
		go -C "$here" build -ldflags "-s -w" -o "$out" go.etcd.io/etcd/server/v3
		;;
	kwok)
		go -C "$here/kwok" build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
			-o "$out" sigs.k8s.io/kwok/cmd/kwok
		;;
	agent-sandbox-controller)
		# The real Sandbox controller (kubernetes-sigs/agent-sandbox), which
		# the test cluster runs beside kube-controller-manager.
		# (its Makefile's version ldflags, so that --version reports it)
		go -C "$here/agentsandbox" build \
			-ldflags "-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=${AGENT_SANDBOX_VERSION}" \
			-o "$out" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
		;;
	agent-sandbox-crd)
		# Its Sandbox CRD, exactly as the module ships it (k8s/crds).
		local dir
		dir="$(go -C "$here/agentsandbox" list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"
		[ -n "$dir" ] || dir="$(go -C "$here/agentsandbox" mod download -json sigs.k8s.io/agent-sandbox |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -f "$dir/k8s/crds/agents.x-k8s.io_sandboxes.yaml" ] || { echo "testenv: no Sandbox CRD in $dir" >&2; return 1; }
		cp "$dir/k8s/crds/agents.x-k8s.io_sandboxes.yaml" "$out"
		;;
	coredns)
		# Only the plugins the real node's Corefile uses (testenv/coredns/main.go).
		go -C "$here/coredns" build -ldflags "-s -w" -o "$out" .
		;;
	tofu)
		local dir
		dir="$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@${TOFU_VERSION}" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -d "$dir" ] || { echo "testenv: could not download github.com/opentofu/opentofu@${TOFU_VERSION}" >&2; return 1; }
		go -C "$dir" build -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$out" ./cmd/tofu
		;;
	terraform)
		local dir src m
		dir="$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod go mod download -json "github.com/hashicorp/terraform@${TERRAFORM_VERSION}" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -d "$dir" ] || { echo "testenv: could not download github.com/hashicorp/terraform@${TERRAFORM_VERSION}" >&2; return 1; }
		src="$(mktemp -d "${TMPDIR:-/tmp}/occ-terraform-src.XXXXXX")"
		cp -R "$dir/." "$src"
		chmod -R u+w "$src"
		for m in azure consul cos gcs kubernetes oss pg s3 oci; do
			mkdir -p "$src/internal/backend/remote-state/$m"
			printf 'module github.com/hashicorp/terraform/internal/backend/remote-state/%s\n\ngo 1.24\n' "$m" \
				>"$src/internal/backend/remote-state/$m/go.mod"
		done
		mkdir -p "$src/internal/legacy"
		printf 'module github.com/hashicorp/terraform/internal/legacy\n\ngo 1.24\n' >"$src/internal/legacy/go.mod"
		sed -i -E '/backend(Azure|Consul|Cos|GCS|Kubernetes|OSS|Pg|S3|OCI) "/d; /^[[:space:]]*"(azurerm|consul|cos|gcs|kubernetes|oss|pg|s3|oci)":[[:space:]]*func/d' \
			"$src/internal/backend/init/init.go"
		GOFLAGS="${GOFLAGS/-mod=readonly/-mod=mod}" go -C "$src" build \
			-ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$out" . || { rm -rf "$src"; return 1; }
		rm -rf "$src"
		;;
	*)
		echo "testenv: unknown binary $name" >&2
		return 1
		;;
	esac
}

# version_check NAME FILE: the binary runs and reports the pinned version.
version_check() {
	local name="$1" file="$2" want="${version[$1]#v}" got
	case "$name" in
	# (an empty CLI configuration: the machine's may name a missing file,
	# which makes tofu print warnings first)
	tofu) got="$(TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 "$file" version 2>&1 | grep -m1 '^OpenTofu v' || true)" ;;
	terraform) got="$(TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 "$file" version 2>&1 | grep -m1 '^Terraform v' || true)" ;;
	kubectl) got="$("$file" version --client 2>&1 | head -3 | tr '\n' ' ')" ;;
	coredns) got="$("$file" -version 2>&1 | head -3 | tr '\n' ' ')" ;;
	# (the CRD is data: checked by what it defines)
	agent-sandbox-crd) got="$(grep -q '^  name: sandboxes.agents.x-k8s.io' "$file" && echo "$want")" ;;
	*) got="$("$file" --version 2>&1 | head -3 | tr '\n' ' ')" ;;
	esac
	if [[ "$got" != *"$want"* ]]; then
		echo "testenv: $name built but reports '$got', expected version $want" >&2
		return 1
	fi
}

ensure() { # NAME
	local name="$1" file tmp start
	file="$(path_of "$name")"
	if [ ! -x "$file" ]; then
		echo "testenv: building $name ${version[$name]} (${eta[$name]})…"
		start=$(date +%s)
		tmp="$file.tmp.$$"
		rm -f "$tmp"
		if ! build_one "$name" "$tmp"; then
			rm -f "$tmp"
			echo "testenv: building $name ${version[$name]} failed" >&2
			return 1
		fi
		version_check "$name" "$tmp" || { rm -f "$tmp"; return 1; }
		mv -f "$tmp" "$file"
		echo "testenv: built $name ${version[$name]} in $(($(date +%s) - start)) s"
	fi
	ln -sfn "../bin/$(basename "$file")" "$current/$name"
}

what="${1:-all}"
case "$what" in
path)
	name="${2:?usage: build.sh path NAME}"
	[ -n "${version[$name]:-}" ] || { echo "testenv: unknown binary $name" >&2; exit 1; }
	path_of "$name"
	exit 0
	;;
list)
	for name in "${kube_names[@]}" "${tofu_names[@]}" kubectl; do
		printf '%-24s %-8s %s\n' "$name" "${version[$name]}" "$(path_of "$name")"
	done
	exit 0
	;;
kube) names=("${kube_names[@]}") ;;
kubectl) names=(kubectl) ;;
tofu) names=("${tofu_names[@]}") ;;
terraform) names=(terraform) ;;
all) names=("${kube_names[@]}" "${tofu_names[@]}") ;;
*)
	echo "usage: $0 [kube|tofu|terraform|kubectl|all|path NAME|list]" >&2
	exit 2
	;;
esac

command -v go >/dev/null || { echo "testenv: go is not on PATH" >&2; exit 1; }
mkdir -p "$bindir" "$current"

count_missing() {
	missing=0
	for name in "${names[@]}"; do
		[ -x "$(path_of "$name")" ] || missing=$((missing + 1))
	done
}

count_missing
# One build at a time, also across concurrent `make testenv` runs; nothing
# to build takes no lock (so it never waits for someone else's build).
if [ "$missing" -gt 0 ] && command -v flock >/dev/null; then
	exec 9>"$cache/.build.lock"
	if ! flock -n 9; then
		echo "testenv: another build is running (lock $cache/.build.lock); waiting…"
		flock 9
		count_missing
	fi
fi
if [ "$missing" -gt 0 ]; then
	echo "testenv: $missing of ${#names[@]} binaries to build into $bindir (one at a time; progress below)"
fi
for name in "${names[@]}"; do
	ensure "$name"
done
echo "testenv: ready in $current (${names[*]})"
