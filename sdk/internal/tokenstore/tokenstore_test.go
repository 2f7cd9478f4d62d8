package tokenstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
