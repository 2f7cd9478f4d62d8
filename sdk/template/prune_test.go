package template

import (
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
)

// TestPruneSound checks mayReinclude exhaustively on small cases: for
// every ordered list of up to three patterns from a set and every path of
// up to three components, no path under a pruned directory is included,
// and a directory some '!' pattern reaches into is not pruned.
func TestPruneSound(t *testing.T) {
	t.Parallel()
	pats := []string{"a", "!a/b", "a/*", "!a/*/c", "*/b", "!*/b/c", "a/b", "!a/b?", "b", "!b/**", "?", "!?/?/?", "!a/bb/c"}
	comps := []string{"a", "b", "c", "bb"}
	var paths [][]string
	var grow func(prefix []string)
	grow = func(prefix []string) {
		if len(prefix) == 3 {
			return
		}
		for _, c := range comps {
			p := append(append([]string(nil), prefix...), c)
			paths = append(paths, p)
			grow(p)
		}
	}
	grow(nil)
	var lists [][]string
	for _, x := range pats {
		lists = append(lists, []string{x})
		for _, y := range pats {
			lists = append(lists, []string{x, y})
			for _, z := range pats {
				lists = append(lists, []string{x, y, z})
			}
		}
	}
	pruned, checked := 0, 0
	for _, l := range lists {
		ig, err := parseIgnore(strings.NewReader(strings.Join(l, "\n")))
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		for _, p := range paths {
			var info patternmatcher.MatchInfo
			cut := ""
			for i := range p {
				rel := strings.Join(p[:i+1], "/")
				ex, next, err := ig.excluded(rel, info)
				if err != nil {
					t.Fatal(err)
				}
				info = next
				checked++
				if cut != "" && !ex {
					t.Fatalf("patterns %q: %s is included under %s, which mayReinclude pruned", l, rel, cut)
				}
				if ex && cut == "" && i < len(p)-1 && !ig.mayReinclude(rel) {
					cut = rel
					pruned++
				}
			}
		}
	}
	if pruned == 0 {
		t.Fatal("nothing was pruned: the test proves nothing")
	}
	t.Logf("%d pattern lists, %d path checks, %d pruned walks", len(lists), checked, pruned)
}

func TestMayReinclude(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ignore, dir string
		want        bool
	}{
		{"node_modules\n!README.md\n", "node_modules", false},
		{"node_modules\n", "node_modules", false},
		{"a\n!a/*/keep\n", "a", true},
		{"a\n!a/*/keep\n", "a/b", true},
		{"a\n!a/*/keep\n", "b", false},
		{"a\n!b/c\n", "a", false},
		{"a\n!**/keep\n", "a", true},
		{"a\n![ab]/keep\n", "a", true},
		{"a\n!a\n", "a", false},
	} {
		ig, err := parseIgnore(strings.NewReader(tc.ignore))
		if err != nil {
			t.Fatal(err)
		}
		if got := ig.mayReinclude(tc.dir); got != tc.want {
			t.Errorf("%q: mayReinclude(%s) = %v", tc.ignore, tc.dir, got)
		}
	}
}
