package project

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Stage copies regular files and directories with normalized modes,
// leaves out .git and the named directories at any depth, never follows a
// link (reported in Skipped), refuses a project over MaxStageBytes, and
// puts the host at bin/rayito-agent-host.
func TestStage(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(outside, []byte("outside the project"), 0o600))
	must(os.MkdirAll(filepath.Join(dir, "lib", ".git"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "cdk.out"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "agent.py"), []byte("print('hi')"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "lib", "util.py"), []byte("x = 1"), 0o640))
	must(os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "lib", ".git", "HEAD"), []byte("ref"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "cdk.out", "asset"), []byte("a"), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "link.txt")))
	must(os.Symlink(filepath.Dir(outside), filepath.Join(dir, "linkdir")))
	host := filepath.Join(t.TempDir(), "host")
	must(os.WriteFile(host, []byte("\x7fELF"), 0o700))

	ctxDir := t.TempDir()
	st, err := Stage(dir, host, ctxDir, "cdk.out")
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 3 || !slices.Equal(st.Skipped, []string{"link.txt", "linkdir"}) {
		t.Fatalf("staged %+v", st)
	}
	for path, mode := range map[string]os.FileMode{"app/agent.py": 0o644, "app/run.sh": 0o755, "app/lib/util.py": 0o644, "bin/" + HostBinary: 0o755} {
		fi, err := os.Lstat(filepath.Join(ctxDir, path))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want a regular file %v", path, fi, err, mode)
		}
	}
	for _, gone := range []string{"app/.git", "app/lib/.git", "app/cdk.out", "app/link.txt", "app/linkdir"} {
		if _, err := os.Lstat(filepath.Join(ctxDir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s was staged: %v", gone, err)
		}
	}
	// Without a host: app only.
	ctx2 := t.TempDir()
	if _, err := Stage(dir, "", ctx2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ctx2, "bin")); !os.IsNotExist(err) {
		t.Errorf("bin/ without a host: %v", err)
	}
	// Over the bound (a sparse file): refused, typed.
	big := t.TempDir()
	f, err := os.Create(filepath.Join(big, "big.bin"))
	must(err)
	must(f.Truncate(MaxStageBytes + 1))
	must(f.Close())
	if _, err := Stage(big, "", t.TempDir()); !errors.Is(err, ErrStage) {
		t.Errorf("a project over %d bytes: %v", MaxStageBytes, err)
	}
	// A directory as the host is not a regular file.
	if _, err := Stage(dir, t.TempDir(), t.TempDir()); !errors.Is(err, ErrStage) {
		t.Errorf("a directory as the host: %v", err)
	}
	// A project that does not exist.
	if _, err := Stage(filepath.Join(dir, "nope"), "", t.TempDir()); !errors.Is(err, ErrStage) {
		t.Errorf("a missing project: %v", err)
	}
}
