package archive

import (
	"errors"
	"strings"
	"testing"
)

func TestExcludes(t *testing.T) {
	t.Parallel()
	ex, err := ParseExcludes([]string{"*.log", "build/", "/top.txt", "src/gen/*.go", "./node_modules/"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rel  string
		dir  bool
		want bool
	}{
		{".cache", true, true},
		{"a/.cache", true, false}, // anchored fixed pattern
		{".cache", false, false},  // a file named .cache is kept
		{"x/y/__pycache__", true, true},
		{".local/share/jupyter/runtime", true, true},
		{".ipython/profile_default/security", true, true},
		{"a/.rayito-tmp-c123", false, true},
		{"app.log", false, true},
		{"deep/dir/app.log", false, true},
		{"build", true, true},
		{"x/build", true, true},
		{"build", false, false},
		{"top.txt", false, true},
		{"a/top.txt", false, false},
		{"src/gen/x.go", false, true},
		{"src/gen/sub/x.go", false, false},
		{"node_modules", true, true},
		{"keep.txt", false, false},
	}
	for _, tc := range cases {
		if got := ex.Match(tc.rel, tc.dir); got != tc.want {
			t.Errorf("Match(%q, dir=%v) = %v, want %v", tc.rel, tc.dir, got, tc.want)
		}
	}
	for _, bad := range [][]string{{""}, {"/"}, {"a/../b"}, {"[x"}, {"a\x00"}, {strings.Repeat("a", 1025)}, make([]string, MaxExcludes+1)} {
		if _, err := ParseExcludes(bad); !errors.Is(err, ErrBadExclude) {
			t.Errorf("ParseExcludes(%.30q): %v, want ErrBadExclude", bad, err)
		} else if len(bad) == 1 && len(bad[0]) > 2 && strings.Contains(err.Error(), bad[0]) {
			t.Errorf("the error quotes the pattern: %v", err)
		}
	}
	if _, err := ParseExcludes(make([]string, 0, MaxExcludes)); err != nil {
		t.Error(err)
	}
}
