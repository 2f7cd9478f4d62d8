package cliutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseEnvs(t *testing.T) {
	t.Parallel()
	got, err := ParseEnvs([]string{"A=1", "B=x=y", "C="})
	if err != nil || got["A"] != "1" || got["B"] != "x=y" || got["C"] != "" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"NOEQ", "=v"} {
		var u *UsageError
		if _, err := ParseEnvs([]string{bad}); !errors.As(err, &u) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestTokenStore(t *testing.T) {
	t.Parallel()
	s := TokenStore{Dir: filepath.Join(t.TempDir(), "tokens")}
	if err := s.Save("microvm-1", "tok"); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Load("microvm-1"); err != nil || tok != "tok" {
		t.Fatalf("%q %v", tok, err)
	}
	st, err := os.Stat(filepath.Join(s.Dir, "microvm-1"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v %v", st.Mode(), err)
	}
	if dst, _ := os.Stat(s.Dir); dst.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", dst.Mode())
	}
	for _, bad := range []string{"", "..", "a/b", `a\b`} {
		if err := s.Save(bad, "x"); err == nil {
			t.Errorf("saved under %q", bad)
		}
	}
	s.Remove("microvm-1")
	if _, err := s.Load("microvm-1"); err == nil {
		t.Fatal("token still there")
	}
}
