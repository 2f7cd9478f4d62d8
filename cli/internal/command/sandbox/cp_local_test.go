package sandbox

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// umask reads the process's umask without changing it (Linux 4.7+).
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return fs.FileMode(n)
		}
	}
	t.Skip("no Umask in /proc/self/status")
	return 0
}

func modeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// Files and directories get the sandbox's modes, less the umask and any
// set-id bit; a directory without rights for its owner is filled all the
// same and gets its mode at the end.
func TestLocalDirModes(t *testing.T) {
	t.Parallel()
	mask := umask(t)
	dir := t.TempDir()
	l, err := openLocalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.writeFile("secret", strings.NewReader("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	// st_mode bits as rayd sends them: S_IFREG|S_ISUID|S_ISGID|0777.
	if _, err := l.writeFile("setid", strings.NewReader("x"), fs.FileMode(0o100000|0o6777)); err != nil {
		t.Fatal(err)
	}
	if err := l.mkdirs("ro", 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := l.writeFile("ro/f", strings.NewReader("f"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{
		"secret": 0o600 &^ mask,
		"setid":  0o777 &^ mask,
		"ro":     fs.ModeDir | 0o500&^mask,
		"ro/f":   0o444 &^ mask,
	} {
		if got := modeOf(t, filepath.Join(dir, name)); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// Nothing is written through a symbolic link below the directory: a link
// in the way of a directory is refused, one at a file's or link's place
// is replaced, not followed.
func TestLocalDirNeverFollowsLinks(t *testing.T) {
	t.Parallel()
	victim := t.TempDir()
	dir := t.TempDir()
	for _, link := range []string{"sub", "file", "lnk"} {
		if err := os.Symlink(filepath.Join(victim, link), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := openLocalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	var ce *cpError
	if err := l.mkdirs("sub", 0o755); !errors.As(err, &ce) || !strings.Contains(err.Error(), "sub: is a symbolic link: not writing through it") {
		t.Errorf("mkdirs through a link: %v", err)
	}
	if _, err := l.writeFile("sub/f", strings.NewReader("x"), 0o644); !errors.As(err, &ce) {
		t.Errorf("a file below a link: %v", err)
	}
	if _, err := l.writeFile("file", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, filepath.Join(dir, "file")); !m.IsRegular() {
		t.Errorf("file: %v, want the link replaced by a file", m)
	}
	if err := l.symlink("lnk", "/etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(dir, "lnk")); got != "/etc/passwd" {
		t.Errorf("lnk -> %q", got)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 1 {
		t.Errorf("written through a link: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(victim, "sub")); len(ents) != 0 {
		t.Errorf("written through a link: %v", ents)
	}
	// A link that appears after the check (here: straight to the file's
	// creation) does not lead out of the directory either (os.Root).
	if err := os.Symlink(victim, filepath.Join(dir, "real")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.root.OpenFile("real/escaped", os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		t.Error("created a file through a link leading out of the directory")
	}
	if _, err := os.Lstat(filepath.Join(victim, "escaped")); err == nil {
		t.Error("escaped written")
	}
}
