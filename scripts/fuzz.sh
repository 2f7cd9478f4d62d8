#!/usr/bin/env bash
# fuzz.sh PKG TARGET... runs each fuzz target of one package for FUZZTIME
# (default 10000x, a count: a deadline can flake on a busy machine;
# FUZZMINIMIZETIME, default 1s, bounds the minimizing of each input),
# building the package's instrumented test binary once rather than once
# per target as `go test -fuzz` does. The corpus it finds goes to
# .tmp/fuzzcache/PKG; the seeds are the package's testdata/fuzz.
set -euo pipefail
pkg=${1:?usage: fuzz.sh ./PKG FuzzTarget...}
shift
[ $# -gt 0 ] || { echo "fuzz.sh: $pkg: no targets" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
name=$(echo "${pkg#./}" | tr / _)
bin=$root/.tmp/fuzz/$name.test
mkdir -p "$root/.tmp/fuzz"
# Any -fuzz pattern makes go test build with the fuzzing instrumentation.
go test -c -ldflags=-w -fuzz "^$1\$" -o "$bin" "$pkg"
cd "$root/${pkg#./}"
for t in "$@"; do
	echo "fuzz $pkg $t"
	"$bin" -test.run '^$' -test.fuzz "^$t\$" -test.fuzztime "${FUZZTIME:-10000x}" -test.fuzzminimizetime "${FUZZMINIMIZETIME:-1s}" \
		-test.fuzzcachedir "$root/.tmp/fuzzcache/$name" || { echo "fuzz.sh: $pkg $t failed (the input is in $pkg/testdata/fuzz/$t)" >&2; exit 1; }
done
