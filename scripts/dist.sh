#!/usr/bin/env bash
# dist.sh: the release artifacts of the components that ship a binary.
#
#   scripts/dist.sh [-C SRC] [-o OUT] [-r REVISION] COMPONENT...
#
# For each COMPONENT (cli → rayito and rayito-sandbox, the binary its local
# platform starts sandboxes from when it lies beside rayito; rayd → rayd, dashboard → rayito-dashboard-stack,
# the dashboard stack's Lambda, events → rayito-events-
# forwarder, -deliverer and -reconciler, the Lambdas) and each of linux/amd64 and
# linux/arm64 it writes into OUT (default SRC/dist, emptied first):
#   <binary>-<version>-linux-<arch>           static, trimmed Go binary
#   <binary>-<version>-linux-<arch>.cdx.json  its CycloneDX SBOM
# and then OUT/SHA256SUMS over every file (sha256sum format, sorted).
# <version> is the component's version in SRC/versions.yaml (v0.1.0).
#
# SRC (default: this checkout) is built in workspace mode (SRC/go.work):
# the sibling modules are not published, the workspace provides them.
# REVISION (default: SRC's HEAD, "-dirty" added when SRC has uncommitted
# changes) is linked in as version.Revision. The output depends only on
# SRC's files, REVISION, the commit time (the SBOM timestamp, or
# SOURCE_DATE_EPOCH when set), the Go toolchain and cyclonedx-gomod
# ($CYCLONEDX_GOMOD, default .tmp/bin/cyclonedx-gomod): `make
# check-reproducible` checks that two clones at different paths agree.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$here out='' rev=''
while getopts C:o:r: opt; do
	case $opt in
	C) src=$(cd "$OPTARG" && pwd) ;;
	o) out=$OPTARG ;;
	r) rev=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-C SRC] [-o OUT] [-r REVISION] COMPONENT..." >&2; exit 2; }
out=${out:-$src/dist}
cyclonedx=${CYCLONEDX_GOMOD:-$here/.tmp/bin/cyclonedx-gomod}
arches=(amd64 arm64)

if [ -z "$rev" ]; then
	rev=$(git -C "$src" rev-parse HEAD)
	if [ -n "$(git -C "$src" status --porcelain)" ]; then
		rev=$rev-dirty
		echo "dist: $src has uncommitted changes: stamping revision $rev" >&2
	fi
fi
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct HEAD)}
timestamp=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# version COMPONENT: the component's version in versions.yaml, from
#   modules:
#     <component>:
#       version: v0.1.0
version() {
	awk -v m="  $1:" '
		/^[^ #]/ { inmodules = ($0 == "modules:") }
		inmodules && $0 == m { found = 1; next }
		found && /^  [^ ]/ { exit }
		found && $1 == "version:" { print $2; exit }
	' "$src/versions.yaml"
}

# The Go environment is spelled out, not inherited: nothing from the
# caller's GOFLAGS, GOAMD64 or GOWORK reaches the build.
goenv=(GOWORK="$src/go.work" GOFLAGS= CGO_ENABLED=0 GOOS=linux GOAMD64=v1 GOARM64=v8.0)
# Every Revision is set in every binary: rayito and rayito-sandbox link
# rayd (the local platform runs it from either, and accepts a
# rayito-sandbox only of its own revision), and -X of a package a binary
# does not link is ignored.
ldflags="-s -w -buildid= -X github.com/rayito-dev/rayito/cli/internal/version.Revision=$rev -X github.com/rayito-dev/rayito/rayd/internal/version.Revision=$rev"

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
for component in "$@"; do
	# Each binary as "artifact-name:main package"; the events Lambdas are
	# built for provided.al2023 without the RPC shim (lambda.norpc): deploy
	# one as the function's `bootstrap`.
	tags=''
	case $component in
	cli) binaries=(rayito:./cli/cmd/rayito rayito-sandbox:./localvm/cmd/rayito-sandbox) ;;
	rayd) binaries=(rayd:./rayd/cmd/rayd rayito-mount-s3:./rayd/cmd/rayito-mount-s3) ;;
	events)
		binaries=(rayito-events-forwarder:./events/cmd/forwarder rayito-events-deliverer:./events/cmd/deliverer rayito-events-reconciler:./events/cmd/reconciler)
		tags=lambda.norpc
		;;
	agenthost) binaries=(rayito-agent-host:./agenthost/cmd/rayito-agent-host) ;;
	dashboard)
		binaries=(rayito-dashboard-stack:./dashboard/cmd/stack)
		tags=lambda.norpc
		;;
	*) echo "dist: unknown component $component (known: cli rayd events dashboard agenthost)" >&2; exit 2 ;;
	esac
	ver=$(version "$component")
	[ -n "$ver" ] || { echo "dist: no version for $component in $src/versions.yaml" >&2; exit 1; }
	for entry in "${binaries[@]}"; do
	binary=${entry%%:*} pkg=${entry#*:}
	for arch in "${arches[@]}"; do
		name=$binary-$ver-linux-$arch
		echo "dist: $name (revision $rev)"
		(cd "$src" && env "${goenv[@]}" GOARCH="$arch" \
			go build -trimpath -buildvcs=false -tags="$tags" -ldflags="$ldflags" -o "$out/$name" "$pkg")
		# The SBOM is read from the binary's own build info (`go version -m`):
		# exactly the modules linked, and the binary's hashes. Not `app`
		# mode: under go.work it lists a phantom workspace module
		# (bench@go1.26.8) and drops edges between siblings. GOOS/GOARCH
		# make the purls name the target. cyclonedx-gomod ignores
		# SOURCE_DATE_EPOCH: -notimestamp, then the line below adds the
		# commit time as metadata.timestamp. -noserial: no random serial.
		env "${goenv[@]}" GOARCH="$arch" \
			"$cyclonedx" bin -json -noserial -notimestamp -version "$ver" -output "$out/$name.cdx.json" "$out/$name"
		[ "$(grep -c '^  "metadata": {$' "$out/$name.cdx.json")" = 1 ] || { echo "dist: unexpected SBOM layout in $name.cdx.json" >&2; exit 1; }
		sed -i "s/^  \"metadata\": {\$/&\n    \"timestamp\": \"$timestamp\",/" "$out/$name.cdx.json"
	done
	done
done
sums=$(cd "$out" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort | xargs -d '\n' sha256sum --)
printf '%s\n' "$sums" >"$out/SHA256SUMS"
echo "dist: $(wc -l <"$out/SHA256SUMS") files and SHA256SUMS in $out"
