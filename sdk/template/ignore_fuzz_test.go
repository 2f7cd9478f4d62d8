package template

import (
	"errors"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
)

// FuzzIgnore: any .dockerignore text either is refused with a typed error
// or gives a matcher that answers for any path without panicking (the
// text comes from the context, which may not be the caller's own), and
// the walk's pruning of excluded directories never hides an included
// path.
func FuzzIgnore(f *testing.F) {
	f.Add("**/.env\n*.md\n!README.md\n", "a/.env")
	f.Add("\uFEFF# c\n/abs\nfoo/../bar\n", "bar")
	f.Add("**\n!src/**\n[a-\n", "src/x")
	f.Add("!\n", "x")
	f.Add("\\#x\n  a/**/b  \n", "a/b/c/b")
	f.Add("node_modules\n!README.md\n!a/*/keep\n", "a/b/keep")
	f.Add("a\n!a/b?/c*\n", "a/bb/cc")
	f.Add("docs\n!docs/keep\ndocs/keep/secret\n", "docs/keep/a")
	f.Fuzz(func(t *testing.T, ignore, p string) {
		ig, err := parseIgnore(strings.NewReader(ignore))
		if err != nil {
			if !errors.Is(err, ErrContextPath) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Walk the path's prefixes as Compile does; once a prefix is an
		// excluded directory that mayReinclude prunes, every longer prefix
		// must be excluded too.
		var info patternmatcher.MatchInfo
		rel, pruned := "", ""
		for _, part := range strings.Split(p, "/") {
			if part == "" || part == "." || part == ".." {
				continue
			}
			if rel != "" {
				rel += "/"
			}
			rel += part
			var ex bool
			if ex, info, err = ig.excluded(rel, info); err != nil {
				if !errors.Is(err, ErrContextPath) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if pruned != "" && !ex {
				t.Fatalf("%q is included under %q, which mayReinclude pruned", rel, pruned)
			}
			if ex && pruned == "" && !ig.mayReinclude(rel) {
				pruned = rel
			}
		}
	})
}
