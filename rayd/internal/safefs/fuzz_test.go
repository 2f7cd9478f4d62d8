package safefs

import (
	"path"
	"strings"
	"testing"
)

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "/", "x", "../x", "/proc/1", "/home/user/./a//b", "a\x00b", "/etc", "/etcx/..", "/run/rayd/x", "....", "/./proc"} {
		f.Add(s, "/home/user")
	}
	f.Add("x", "")
	f.Add("y", "/etc")
	f.Add("z", "/home/../etc")
	deny, _ := normalizeDeny(append(DefaultDeny, "/run/rayd"))
	f.Fuzz(func(t *testing.T, p, home string) {
		got, err := resolvePath(deny, home, p)
		if err != nil {
			if _, ok := err.(*PathError); !ok {
				t.Fatalf("error %T is not a *PathError", err)
			}
			return
		}
		if !strings.HasPrefix(got, "/") || path.Clean(got) != got || len(got) > MaxPathLen || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("accepted %q -> %q: not absolute and clean", p, got)
		}
		for _, c := range strings.Split(got, "/") {
			if c == ".." {
				t.Fatalf("accepted %q -> %q: contains ..", p, got)
			}
		}
		if strings.Contains(p, "..") && strings.Contains("/"+p+"/", "/../") {
			t.Fatalf("accepted %q with a .. component", p)
		}
		for _, d := range deny {
			if got == d || strings.HasPrefix(got, d+"/") {
				t.Fatalf("accepted %q -> %q under denied %q", p, got, d)
			}
		}
	})
}
