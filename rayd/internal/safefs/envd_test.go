package safefs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rootDir makes a directory the user may search but not write (root's,
// 0755) under a home of the user, like / or /var in a sandbox.
func rootDir(t *testing.T, home string) string {
	t.Helper()
	d := filepath.Join(home, "rootowned")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// E2B's envd creates missing parents as root and gives them to the user;
// an Envd FS does the same where the user's own mkdir is refused, within
// safefs' rules, and a plain FS does not.
func TestEnvdParentsForUser(t *testing.T) {
	u, home := userHome(t)
	ro := rootDir(t, home)
	ctx := context.Background()
	plain := newFS(t, Options{Privileged: true})
	if _, err := plain.WriteFile(ctx, u, ro+"/a/x", strings.NewReader("x"), 0, nil); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("plain FS wrote under a root directory: %v", err)
	}
	modes(t, Options{Privileged: true, Envd: true}, func(t *testing.T, f *FS) {
		sub := filepath.Join(ro, filepath.Base(t.Name()))
		e, err := f.WriteFile(ctx, u, sub+"/a/b/x", strings.NewReader("x"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.UID != testUID || e.Path != sub+"/a/b/x" {
			t.Errorf("entry %+v", e)
		}
		for _, d := range []string{sub, sub + "/a", sub + "/a/b", sub + "/a/b/x"} {
			var st unix.Stat_t
			if err := unix.Lstat(d, &st); err != nil || st.Uid != testUID || st.Gid != testUID {
				t.Errorf("%s: uid %d gid %d, %v", d, st.Uid, st.Gid, err)
			}
		}
		if _, err := f.MakeDir(ctx, u, sub+"/made/deep"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.MakeDir(ctx, u, ro+"/top-"+filepath.Base(t.Name())); err != nil {
			t.Fatalf("MakeDir in a root directory: %v", err)
		}
		if _, err := f.Move(ctx, u, sub+"/a/b/x", sub+"/moved/to/x"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Move(ctx, u, sub+"/missing", sub+"/nodirs/x"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("move of a missing source: %v", err)
		}
		if _, err := os.Stat(sub + "/nodirs"); !os.IsNotExist(err) {
			t.Errorf("a missing source made directories: %v", err)
		}
		// An existing directory the user cannot write stays so.
		if _, err := f.WriteFile(ctx, u, ro+"/file", strings.NewReader("x"), 0, nil); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("file in a root directory: %v", err)
		}
		// What was made for the user there, the user may remove; what is
		// root's, not.
		if err := f.Remove(ctx, u, sub, true); err != nil {
			t.Errorf("Remove of the user's directory in a root directory: %v", err)
		}
		if _, err := os.Stat(sub); !os.IsNotExist(err) {
			t.Errorf("after Remove: %v", err)
		}
		rootFile := filepath.Join(ro, "root-"+filepath.Base(t.Name()))
		mustWrite(t, rootFile, "x", 0o644)
		if err := f.Remove(ctx, u, rootFile, false); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Remove of root's file: %v", err)
		}
		if err := plain.Remove(ctx, u, ro+"/top-"+filepath.Base(t.Name()), true); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("a plain FS removed in a root directory: %v", err)
		}
	})
	// Not in a directory the user cannot search, not through a link, not
	// in a read-only or denied prefix.
	f := newFS(t, Options{Privileged: true, Envd: true, ReadOnly: []string{filepath.Join(home, "ro")}})
	closed := filepath.Join(home, "closed")
	if err := os.Mkdir(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(closed, "secret")
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteFile(ctx, u, secret+"/new/x", strings.NewReader("x"), 0, nil); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write in an unsearchable directory: %v", err)
	}
	if _, err := os.Stat(secret + "/new"); !os.IsNotExist(err) {
		t.Errorf("a directory was made where the user cannot search: %v", err)
	}
	if err := os.Symlink(ro, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteFile(ctx, u, home+"/link/new/x", strings.NewReader("x"), 0, nil); !errors.Is(err, ErrSymlink) {
		t.Errorf("write through a link: %v", err)
	}
	if _, err := f.WriteFile(ctx, u, home+"/ro/new/x", strings.NewReader("x"), 0, nil); !errors.Is(err, ErrDenied) {
		t.Errorf("write in a read-only prefix: %v", err)
	}
	if _, err := f.MakeDir(ctx, u, "/proc/new"); !errors.Is(err, ErrDenied) {
		t.Errorf("MakeDir in /proc: %v", err)
	}
}

// Metadata: our own FS writes user.rayito.*, an Envd FS user.e2b.*, both
// read both, their own namespace winning a key in both.
func TestEnvdMetadataNamespaces(t *testing.T) {
	u, home := userHome(t)
	ctx := context.Background()
	own := newFS(t, Options{Privileged: true})
	envd := newFS(t, Options{Privileged: true, Envd: true})
	if _, err := own.WriteFile(ctx, u, "own", strings.NewReader("x"), 0, map[string]string{"k": "ours"}); err != nil {
		t.Fatal(err)
	}
	if _, err := envd.WriteFile(ctx, u, "e2b", strings.NewReader("x"), 0, map[string]string{"k": "e2b"}); err != nil {
		t.Fatal(err)
	}
	xattr := func(p, name string) string {
		b := make([]byte, 64)
		n, err := unix.Lgetxattr(filepath.Join(home, p), name, b)
		if err != nil {
			return ""
		}
		return string(b[:n])
	}
	if xattr("own", "user.rayito.k") != "ours" || xattr("own", "user.e2b.k") != "" {
		t.Errorf("own FS xattrs: %q %q", xattr("own", "user.rayito.k"), xattr("own", "user.e2b.k"))
	}
	if xattr("e2b", "user.e2b.k") != "e2b" || xattr("e2b", "user.rayito.k") != "" {
		t.Errorf("Envd FS xattrs: %q %q", xattr("e2b", "user.e2b.k"), xattr("e2b", "user.rayito.k"))
	}
	for _, f := range []*FS{own, envd} {
		for p, want := range map[string]string{"own": "ours", "e2b": "e2b"} {
			if e, err := f.Stat(ctx, u, p); err != nil || e.Metadata["k"] != want {
				t.Errorf("envd=%v Stat(%s).Metadata = %v, %v", f.Envd(), p, e.Metadata, err)
			}
		}
	}
	// A key in both namespaces, set by hand: each FS shows its own.
	both := filepath.Join(home, "both")
	mustWrite(t, both, "x", 0o644)
	unix.Lsetxattr(both, "user.rayito.k", []byte("r"), 0)
	unix.Lsetxattr(both, "user.e2b.k", []byte("e"), 0)
	unix.Lsetxattr(both, "user.e2b.only", []byte("o"), 0)
	unix.Lsetxattr(both, "user.other", []byte("no"), 0)
	if e, _ := own.Stat(ctx, u, "both"); e.Metadata["k"] != "r" || e.Metadata["only"] != "o" || len(e.Metadata) != 2 {
		t.Errorf("own FS reads %v", e.Metadata)
	}
	if e, _ := envd.Stat(ctx, u, "both"); e.Metadata["k"] != "e" || e.Metadata["only"] != "o" || len(e.Metadata) != 2 {
		t.Errorf("Envd FS reads %v", e.Metadata)
	}
}

// An Envd FS renders permissions as Go (envd) does and describes a link by
// where it leads.
func TestEnvdEntries(t *testing.T) {
	u, home := userHome(t)
	ctx := context.Background()
	mustWrite(t, filepath.Join(home, "f"), "hello", 0o640)
	unix.Setxattr(filepath.Join(home, "f"), "user.e2b.k", []byte("v"), 0)
	os.Mkdir(filepath.Join(home, "d"), 0o755)
	for link, target := range map[string]string{"lf": "f", "ld": "d", "lbroken": "nothere", "lchain": "lf", "lproc": "/proc/self", "lloop": "lloop"} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"f", "d", "lf", "ld", "lbroken", "lchain", "lproc", "lloop"} {
		os.Lchown(filepath.Join(home, p), testUID, testUID)
	}
	unix.Chmod(filepath.Join(home, "f"), 0o4750) // after chown, which drops setuid
	own := newFS(t, Options{Privileged: true})
	if e, _ := own.Stat(ctx, u, "lf"); e.Type != TypeSymlink || e.SymlinkTarget != "f" || e.Perm != "lrwxrwxrwx" {
		t.Errorf("own FS link: %+v", e)
	}
	f := newFS(t, Options{Privileged: true, Envd: true})
	type want struct {
		typ    FileType
		perm   fs.FileMode
		target string
		str    string
		md     string
	}
	wants := map[string]want{
		"f":       {TypeFile, 0o750, "", "urwxr-x---", "v"},
		"d":       {TypeDir, 0o755, "", "drwxr-xr-x", ""},
		"lf":      {TypeFile, 0o750, home + "/f", "Lrwxrwxrwx", "v"},
		"lchain":  {TypeFile, 0o750, home + "/f", "Lrwxrwxrwx", "v"},
		"ld":      {TypeDir, 0o755, home + "/d", "Lrwxrwxrwx", ""},
		"lbroken": {TypeOther, 0, home + "/lbroken", "Lrwxrwxrwx", ""},
		"lproc":   {TypeOther, 0, home + "/lproc", "Lrwxrwxrwx", ""},
		"lloop":   {TypeOther, 0, home + "/lloop", "Lrwxrwxrwx", ""},
	}
	check := func(how string, e Entry) {
		w, ok := wants[e.Name]
		if !ok {
			return
		}
		if e.Type != w.typ || e.Mode.Perm() != w.perm || e.SymlinkTarget != w.target || e.Perm != w.str || e.Metadata["k"] != w.md || e.Path != home+"/"+e.Name {
			t.Errorf("%s %s: %+v, want %+v", how, e.Name, e, w)
		}
	}
	for p := range wants {
		e, err := f.Stat(ctx, u, p)
		if err != nil {
			t.Fatalf("Stat %s: %v", p, err)
		}
		check("Stat", e)
	}
	es, err := f.ListDir(ctx, u, ".", 3)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if strings.Count(strings.TrimPrefix(e.Path, home+"/"), "/") > 0 {
			t.Errorf("ListDir descended into %s", e.Path) // links are not followed
		}
		if _, ok := wants[e.Name]; ok {
			n++
		}
		check("ListDir", e)
	}
	if n != len(wants) {
		t.Errorf("ListDir listed %d of %d", n, len(wants))
	}
}
