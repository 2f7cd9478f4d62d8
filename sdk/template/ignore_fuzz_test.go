package template

import (
	"errors"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
)

// FuzzIgnore: any .dockerignore text either is refused with a typed error
// or gives a matcher that answers for any path without panicking (the
// text comes from the context, which may not be the caller's own).
func FuzzIgnore(f *testing.F) {
	f.Add("**/.env\n*.md\n!README.md\n", "a/.env")
	f.Add("\uFEFF# c\n/abs\nfoo/../bar\n", "bar")
	f.Add("**\n!src/**\n[a-\n", "src/x")
	f.Add("!\n", "x")
	f.Add("\\#x\n  a/**/b  \n", "a/b/c/b")
	f.Fuzz(func(t *testing.T, ignore, p string) {
		ig, err := parseIgnore(strings.NewReader(ignore))
		if err != nil {
			if !errors.Is(err, ErrContextPath) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var info patternmatcher.MatchInfo
		rel := ""
		for _, part := range strings.Split(p, "/") {
			if part == "" || part == "." || part == ".." {
				continue
			}
			if rel != "" {
				rel += "/"
			}
			rel += part
			if _, info, err = ig.excluded(rel, info); err != nil && !errors.Is(err, ErrContextPath) {
				t.Fatalf("untyped error %v", err)
			}
		}
		_ = ig.mayReinclude()
	})
}
