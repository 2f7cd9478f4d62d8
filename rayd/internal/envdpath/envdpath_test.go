package envdpath

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct{ p, workdir, want string }{
		{"", "", "/home/user"},
		{"", "/srv/app", "/srv/app"},
		{"~", "", "/home/user"},
		{"~/", "", "/home/user"},
		{"~/a/b", "/srv", "/home/user/a/b"},
		{"a.txt", "/srv", "/home/user/a.txt"},
		{"./a/../b", "", "/home/user/b"},
		{"../../etc/passwd", "", "/etc/passwd"},
		{"../../../..", "", "/"},
		{"/tmp/x/", "", "/tmp/x"},
		{"/a/./b//c/../d", "", "/a/b/d"},
		{"/", "", "/"},
		{"a~b", "", "/home/user/a~b"},
		{"/~", "", "/~"},
	} {
		got, err := Resolve(tc.p, "/home/user", tc.workdir)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q, workdir %q) = %q, %v; want %q", tc.p, tc.workdir, got, err, tc.want)
		}
	}
	for _, p := range []string{"~root", "~root/x", "~user"} {
		if _, err := Resolve(p, "/home/user", ""); !errors.Is(err, ErrOtherHome) {
			t.Errorf("Resolve(%q) = %v, want ErrOtherHome", p, err)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "~", "~/x", "~x", "a/../..", "/a//b/./c/..", "..", "\x00", "~/../../"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Resolve(p, "/home/user", "/work")
		if err == nil {
			if g2, err2 := Resolve(p, "", ""); err2 != nil || !path.IsAbs(g2) {
				t.Fatalf("Resolve(%q) without a home = %q, %v", p, g2, err2)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrOtherHome) || !strings.HasPrefix(p, "~") {
				t.Fatalf("Resolve(%q): %v", p, err)
			}
			return
		}
		if !path.IsAbs(got) || path.Clean(got) != got {
			t.Fatalf("Resolve(%q) = %q: not absolute and clean", p, got)
		}
		for _, c := range strings.Split(got, "/") {
			if c == ".." || c == "." {
				t.Fatalf("Resolve(%q) = %q keeps %q", p, got, c)
			}
		}
	})
}
