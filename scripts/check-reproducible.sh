#!/usr/bin/env bash
# check-reproducible.sh: build the dist of HEAD twice, from two fresh clones
# at different paths, and fail unless both SHA256SUMS are byte-identical.
#
#   scripts/check-reproducible.sh COMPONENT...
#
# Both builds are of HEAD, stamped with HEAD's sha: uncommitted changes are
# in neither (a clone only has committed files), and the output says so when
# the working tree has some. The build recipe (scripts/dist.sh) is this
# checkout's, so a change to it is checked before it is committed. The two
# builds share the Go build cache: -trimpath makes the compiled packages
# independent of the clone's path, so the second build mostly links.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$here/.tmp/reproducible
head=$(git -C "$here" rev-parse HEAD)

if [ -n "$(git -C "$here" status --porcelain)" ]; then
	echo "check-reproducible: the working tree has uncommitted changes; they are in neither build: both are of HEAD $head"
fi

rm -rf "$work"
# Different depths, so that a path leaking into an artifact shows.
a=$work/a/src
b=$work/b/another/checkout/src
for dir in "$a" "$b"; do
	git clone --quiet --no-checkout "$here" "$dir"
	git -C "$dir" -c advice.detachedHead=false checkout --quiet --detach "$head"
	"$here/scripts/dist.sh" -C "$dir" -o "$dir.dist" -r "$head" "$@"
done

if cmp -s "$a.dist/SHA256SUMS" "$b.dist/SHA256SUMS"; then
	echo "check-reproducible: HEAD $head builds reproducibly: $(wc -l <"$a.dist/SHA256SUMS") files, identical SHA256SUMS"
	rm -rf "$work"
	exit 0
fi
echo "check-reproducible: the two builds of HEAD $head differ:" >&2
diff "$a.dist/SHA256SUMS" "$b.dist/SHA256SUMS" >&2 || true
echo "differing files (kept under $work):" >&2
join -j 2 <(sort -k 2 "$a.dist/SHA256SUMS") <(sort -k 2 "$b.dist/SHA256SUMS") | awk '$2 != $3 { print "  " $1 }' >&2
exit 1
