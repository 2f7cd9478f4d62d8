package identity

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func checkField(t *testing.T, what, s string) {
	t.Helper()
	if strings.ContainsAny(s, ":\n") {
		t.Fatalf("%s %q contains a separator", what, s)
	}
}

func FuzzParsePasswd(f *testing.F) {
	f.Add([]byte(testPasswd))
	f.Add([]byte("a:x:1:2:g:/h:/s"))
	f.Add([]byte("a:x:1:2:g:/h:/s\r\n\n#c\n+x\n-y\nb::4294967295:0:::\n"))
	f.Add([]byte("a:x:-1:2:::\n:x:1:1:::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parsePasswd(data)
		if err != nil {
			if len(data) <= MaxLineLength {
				t.Fatalf("error on a small input: %v", err)
			}
			return
		}
		var b strings.Builder
		for _, e := range entries {
			if e.Name == "" {
				t.Fatal("entry with empty name")
			}
			checkField(t, "name", e.Name)
			checkField(t, "home", e.Home)
			checkField(t, "shell", e.Shell)
			fmt.Fprintf(&b, "%s:x:%d:%d::%s:%s\n", e.Name, e.UID, e.GID, e.Home, e.Shell)
		}
		// Re-serialising the accepted entries must parse back to the same.
		again, err := parsePasswd([]byte(b.String()))
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if !slices.Equal(entries, again) {
			t.Fatalf("round trip mismatch:\n%+v\n%+v", entries, again)
		}
	})
}

func FuzzParseGroup(f *testing.F) {
	f.Add([]byte(testGroup))
	f.Add([]byte("g:x:1:a,b,,c\n"))
	f.Add([]byte("g:x:1:\r\n#x\ng::2:a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		groups, err := parseGroup(data)
		if err != nil {
			if len(data) <= MaxLineLength {
				t.Fatalf("error on a small input: %v", err)
			}
			return
		}
		var b strings.Builder
		for _, g := range groups {
			if g.Name == "" {
				t.Fatal("group with empty name")
			}
			checkField(t, "name", g.Name)
			for _, m := range g.Members {
				if m == "" || strings.ContainsAny(m, ":,\n") {
					t.Fatalf("bad member %q", m)
				}
			}
			fmt.Fprintf(&b, "%s:x:%d:%s\n", g.Name, g.GID, strings.Join(g.Members, ","))
		}
		again, err := parseGroup([]byte(b.String()))
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if len(again) != len(groups) {
			t.Fatalf("round trip: %d groups, want %d", len(again), len(groups))
		}
		for i := range groups {
			if groups[i].Name != again[i].Name || groups[i].GID != again[i].GID || !slices.Equal(groups[i].Members, again[i].Members) {
				t.Fatalf("round trip mismatch at %d: %+v vs %+v", i, groups[i], again[i])
			}
		}
	})
}
