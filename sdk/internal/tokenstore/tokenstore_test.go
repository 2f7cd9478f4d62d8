package tokenstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadRemove(t *testing.T) {
	t.Parallel()
	s := Store{Dir: filepath.Join(t.TempDir(), "rayito", "tokens")}
	if err := s.Save("microvm-1", "tok"); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Load("microvm-1"); err != nil || tok != "tok" {
		t.Fatalf("Load = %q, %v", tok, err)
	}
	st, err := os.Stat(filepath.Join(s.Dir, "microvm-1"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v", st.Mode(), err)
	}
	if st, err := os.Stat(s.Dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v", st.Mode(), err)
	}
	if err := s.Save("microvm-1", "tok2"); err != nil {
		t.Fatal(err)
	}
	if tok, _ := s.Load("microvm-1"); tok != "tok2" {
		t.Fatalf("overwrite: %q", tok)
	}
	if err := s.Remove("microvm-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("microvm-1"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("after Remove: %v", err)
	}
	if err := s.Remove("microvm-1"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestWidensNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tokens")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (Store{Dir: dir}).Save("a", "t"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", st.Mode())
	}
}

func TestInvalidIDs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := Store{Dir: filepath.Join(root, "tokens")}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, "/abs", ".hidden", "a\x00b", "a b", string(make([]byte, 129))} {
		if err := s.Save(bad, "x"); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Save(%q) = %v", bad, err)
		}
		if _, err := s.Load(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Load(%q) = %v", bad, err)
		}
		if err := s.Remove(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Remove(%q) = %v", bad, err)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) > 1 {
		t.Fatalf("files outside the store: %v", ents)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Parallel()
	env := map[string]string{"XDG_STATE_HOME": "/state", "HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d, _ := DefaultDir(get); d != "/state/rayito/tokens" {
		t.Fatalf("XDG: %s", d)
	}
	env["XDG_STATE_HOME"] = "relative"
	if d, _ := DefaultDir(get); d != "/home/u/.local/state/rayito/tokens" {
		t.Fatalf("relative XDG: %s", d)
	}
	delete(env, "XDG_STATE_HOME")
	if d, _ := DefaultDir(get); d != "/home/u/.local/state/rayito/tokens" {
		t.Fatalf("HOME: %s", d)
	}
}

// Sweep removes tokens saved longer ago than the maximum age and stale
// temporary files of interrupted saves, and nothing else: not a fresh
// token, not an old file that is not a token, not a symbolic link or what
// it points to, not a directory.
func TestSweep(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := Store{Dir: filepath.Join(root, "tokens")}
	if n, err := s.Sweep(time.Now(), time.Hour, func(string) bool { return true }); n != 0 || err != nil {
		t.Fatalf("Sweep of a missing store = %d, %v", n, err)
	}
	now := time.Now()
	old := now.Add(-10 * time.Hour)
	isToken := func(v string) bool { return strings.HasPrefix(v, "tok-") }
	for id, tok := range map[string]string{"microvm-old": "tok-old", "microvm-new": "tok-new", "microvm-notatoken": "hello"} {
		if err := s.Save(id, tok); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(root, "precious")
	if err := os.WriteFile(outside, []byte("tok-outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.Dir, "microvm-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.Dir, "microvm-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{".tmp-123": "tok-x", ".tmp-456": "tok-y", "bad name": "tok-z"} {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"microvm-old", "microvm-notatoken", "microvm-dir", ".tmp-123", "bad name", "../precious"} {
		if err := os.Chtimes(filepath.Join(s.Dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Sweep(now, 9*time.Hour, isToken)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 (the old token, the stale temporary file)", n, err)
	}
	var left []string
	ents, _ := os.ReadDir(s.Dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := []string{".tmp-456", "bad name", "microvm-dir", "microvm-link", "microvm-new", "microvm-notatoken"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %q, want %q", left, want)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "tok-outside" {
		t.Fatalf("the symbolic link's target: %q, %v", b, err)
	}
	if tok, err := s.Load("microvm-new"); err != nil || tok != "tok-new" {
		t.Fatalf("the fresh token: %q, %v", tok, err)
	}
}
