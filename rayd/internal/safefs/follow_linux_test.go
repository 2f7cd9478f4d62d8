package safefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func symlink(t *testing.T, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// chownTree gives everything under dir (not dir itself) to uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// followTree is the tree of TestFollowSymlinks.
type followTree struct {
	u                 User
	home, root, state string
}

// newFollowTree builds, in HOME (owned by the user):
//
//	data.csv, latest.csv -> data.csv, releases/v2/{app.txt, back -> ../../data.csv},
//	current -> releases/v2, chains, loops, and links towards denied places;
//
// in ROOT (root's, 0755): an /etc/os-release-like pair, a root-only file and
// a sticky world-writable directory; STATE stands for rayd's state dir
// (world-readable, so only the policy keeps it out).
func newFollowTree(t *testing.T) followTree {
	u, home := userHome(t)
	root, state := t.TempDir(), t.TempDir()
	for _, d := range []string{root, state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(state, "token"), "STATE-SECRET", 0o644)
	for _, d := range []string{"etc", "usr/lib", "secret", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(root, "usr/lib/os-release"), "ID=rayito\n", 0o644)
	symlink(t, "../usr/lib/os-release", filepath.Join(root, "etc/os-release"), 0)
	mustWrite(t, filepath.Join(root, "secret/x"), "root secret", 0o600)
	if err := unix.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	// In the sticky directory: links by another account, by the user and
	// by the directory's owner.
	symlink(t, filepath.Join(home, "data.csv"), filepath.Join(root, "tmp/other"), 2000)
	symlink(t, filepath.Join(home, "data.csv"), filepath.Join(root, "tmp/mine"), testUID)
	symlink(t, filepath.Join(home, "data.csv"), filepath.Join(root, "tmp/roots"), 0)

	h := func(p string) string { return filepath.Join(home, p) }
	mustWrite(t, h("data.csv"), "a,b\n", 0o644)
	if err := os.MkdirAll(h("releases/v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, h("releases/v2/app.txt"), "v2", 0o644)
	links := [][2]string{
		{"data.csv", "latest.csv"},
		{"../../data.csv", "releases/v2/back"},
		{"releases/v2", "current"},
		{h("data.csv"), "abs"},
		{"c2", "c1"}, {"c3", "c2"}, {"current/app.txt", "c3"},
		{"loop2", "loop1"}, {"loop1", "loop2"}, {"self", "self"},
		{"nope", "dangling"},
		{"data.csv/", "slash"},
		{".", "here"},
		{"releases/v2/../..", "up"},
		{filepath.Join(root, "etc/os-release"), "osr"},
		{filepath.Join(root, "etc"), "etc"},
		{filepath.Join(root, "secret/x"), "secretl"},
		{filepath.Join(root, "tmp"), "tmp"},
		// Towards denied places.
		{"/proc/self/environ", "env"},
		{"/proc/1/environ", "env1"},
		{"/proc/self/fd/0", "fd0"},
		{"/proc/self/cwd", "cwd"},
		{"/proc/1/root/etc/passwd", "proot"},
		{"/sys/kernel/notes", "sysl"},
		{"/dev/null", "devl"},
		{"/dev", "devdir"},
		{"/dev/shm", "shm"},
		{strings.Repeat("../", 40) + "proc/self/environ", "rel"},
		{"p2", "p1"}, {"/proc", "p2"},
		{filepath.Join(state, "token"), "statel"},
		{state, "statedir"},
		{filepath.Dir(state), "stateparent"},
		{"env", "viaenv"},
	}
	for _, l := range links {
		symlink(t, l[0], h(l[1]), testUID)
	}
	// k0 -> k1 -> ... -> k39 -> data.csv: 40 links; j0 ... j40: 41.
	for i := range MaxSymlinks {
		next := fmt.Sprintf("k%d", i+1)
		if i == MaxSymlinks-1 {
			next = "data.csv"
		}
		symlink(t, next, h(fmt.Sprintf("k%d", i)), testUID)
	}
	for i := range MaxSymlinks + 1 {
		next := fmt.Sprintf("j%d", i+1)
		if i == MaxSymlinks {
			next = "data.csv"
		}
		symlink(t, next, h(fmt.Sprintf("j%d", i)), testUID)
	}
	chownTree(t, home, testUID)
	return followTree{u: u, home: home, root: root, state: state}
}

func readAll(t *testing.T, f *FS, u User, p string) (string, Entry, error) {
	t.Helper()
	rc, e, err := f.ReadFile(context.Background(), u, p)
	if err != nil {
		return "", e, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return string(b), e, nil
}

func reasonOf(err error) string {
	var pe *PathError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

func TestFollowSymlinks(t *testing.T) {
	tr := newFollowTree(t)
	u, home := tr.u, tr.home
	stateBase := filepath.Base(tr.state)
	// Reads that the user's own cat would do.
	good := []struct{ path, want string }{
		{"latest.csv", "a,b\n"},
		{"current/app.txt", "v2"},
		{"current/back", "a,b\n"}, // ".." from the link's real directory
		{"abs", "a,b\n"},
		{"c1", "v2"}, // three links, the last through a directory link
		{"k0", "a,b\n"},
		{"here/latest.csv", "a,b\n"},
		{"up/current/app.txt", "v2"},
		{"osr", "ID=rayito\n"},            // /etc/os-release-like: ../usr/lib/os-release
		{"etc/os-release", "ID=rayito\n"}, // the same through a directory link
		{filepath.Join(tr.root, "etc/os-release"), "ID=rayito\n"},
		{"tmp/mine", "a,b\n"},  // sticky dir, the user's link
		{"tmp/roots", "a,b\n"}, // sticky dir, the directory owner's link
	}
	bad := []struct {
		path   string
		err    error
		reason string
	}{
		{"loop1", ErrSymlinkLoop, "symlink_loop"},
		{"self", ErrSymlinkLoop, "symlink_loop"},
		{"j0", ErrSymlinkLoop, "symlink_loop"},
		{"dangling", fs.ErrNotExist, "not_found"},
		{"slash", ErrNotDir, "not_dir"},
		{"current", ErrNotRegular, "not_regular"},
		{"here", ErrNotRegular, "not_regular"},
		{"latest.csv/x", ErrNotDir, "not_dir"},
		{"env", ErrDenied, "denied"},
		{"env1", ErrDenied, "denied"},
		{"fd0", ErrDenied, "denied"},
		{"cwd/x", ErrDenied, "denied"},
		{"proot", ErrDenied, "denied"},
		{"sysl", ErrDenied, "denied"},
		{"devl", ErrDenied, "denied"},
		{"devdir/null", ErrDenied, "denied"},
		{"shm/x", ErrDenied, "denied"},
		{"rel", ErrDenied, "denied"},
		{"p1/self/environ", ErrDenied, "denied"},
		{"p1/1/environ", ErrDenied, "denied"},
		{"viaenv", ErrDenied, "denied"},
		{"statel", ErrDenied, "denied"},
		{"statedir/token", ErrDenied, "denied"},
		{"stateparent/" + stateBase + "/token", ErrDenied, "denied"},
		{"tmp/other", unix.EACCES, "permission"}, // protected_symlinks
	}
	if fi, err := os.Lstat("/etc/os-release"); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		want, err := os.ReadFile("/etc/os-release")
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, struct{ path, want string }{"/etc/os-release", string(want)})
	}
	modes(t, Options{Privileged: true, RaydDirs: []string{tr.state}}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		for _, c := range good {
			got, e, err := readAll(t, f, u, c.path)
			if err != nil || got != c.want {
				t.Errorf("ReadFile(%s) = %q, %v; want %q", c.path, got, err, c.want)
				continue
			}
			want, _ := f.Resolve(u, c.path)
			if e.Type != TypeFile || e.Path != want || e.Name != filepath.Base(want) || e.Size != int64(len(c.want)) || e.SymlinkTarget != "" {
				t.Errorf("ReadFile(%s) entry %+v", c.path, e)
			}
		}
		for _, c := range bad {
			_, _, err := readAll(t, f, u, c.path)
			if !errors.Is(err, c.err) || reasonOf(err) != c.reason {
				t.Errorf("ReadFile(%s) = %v; want %v (%s)", c.path, err, c.err, c.reason)
			}
			if err != nil && strings.Contains(err.Error(), "/") {
				t.Errorf("error message names a path: %q", err)
			}
		}
		// A loop is also a symlink error (reason SYMLINK on the wire).
		if _, _, err := readAll(t, f, u, "loop1"); !errors.Is(err, ErrSymlink) || !errors.Is(err, unix.ELOOP) {
			t.Errorf("loop: %v does not match ErrSymlink and ELOOP", err)
		}
		// The kernel checks the user's permissions on the target.
		if _, _, err := readAll(t, f, u, "secretl"); !errors.Is(err, unix.EACCES) || errors.Is(err, ErrDenied) {
			t.Errorf("ReadFile(secretl): %v, want EACCES", err)
		}

		// Stat: lstat semantics for the last component, links above it
		// followed.
		st := func(p string) Entry {
			t.Helper()
			e, err := f.Stat(ctx, u, p)
			if err != nil {
				t.Errorf("Stat(%s): %v", p, err)
			}
			return e
		}
		if e := st("latest.csv"); e.Type != TypeSymlink || e.SymlinkTarget != "data.csv" || e.Path != filepath.Join(home, "latest.csv") {
			t.Errorf("Stat(latest.csv) = %+v", e)
		}
		if e := st("current"); e.Type != TypeSymlink || e.SymlinkTarget != "releases/v2" {
			t.Errorf("Stat(current) = %+v", e)
		}
		if e := st("env"); e.Type != TypeSymlink || e.SymlinkTarget != "/proc/self/environ" {
			t.Errorf("Stat(env) = %+v", e)
		}
		if e := st("current/app.txt"); e.Type != TypeFile || e.Size != 2 || e.Path != filepath.Join(home, "current/app.txt") || e.Name != "app.txt" {
			t.Errorf("Stat(current/app.txt) = %+v", e)
		}
		if e := st("current/back"); e.Type != TypeSymlink || e.SymlinkTarget != "../../data.csv" {
			t.Errorf("Stat(current/back) = %+v", e)
		}
		if e := st("osr"); e.Type != TypeSymlink {
			t.Errorf("Stat(osr) = %+v", e)
		}
		for _, p := range []string{"p1/self", "p1/1/environ", "stateparent/" + stateBase, "statedir/token", "devdir/null"} {
			if _, err := f.Stat(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("Stat(%s): %v, want ErrDenied", p, err)
			}
		}
		if _, err := f.Stat(ctx, u, "loop1/x"); !errors.Is(err, ErrSymlinkLoop) {
			t.Errorf("Stat(loop1/x): %v, want ErrSymlinkLoop", err)
		}
		// StatFollow: stat semantics.
		if e, err := f.StatFollow(ctx, u, "latest.csv"); err != nil || e.Type != TypeFile || e.Size != 4 || e.Name != "latest.csv" || e.Path != filepath.Join(home, "latest.csv") {
			t.Errorf("StatFollow(latest.csv) = %+v, %v", e, err)
		}
		if e, err := f.StatFollow(ctx, u, "current"); err != nil || e.Type != TypeDir || e.Name != "current" {
			t.Errorf("StatFollow(current) = %+v, %v", e, err)
		}
		if e, err := f.StatFollow(ctx, u, "here"); err != nil || e.Type != TypeDir || e.UID != testUID {
			t.Errorf("StatFollow(here) = %+v, %v", e, err)
		}
		for p, want := range map[string]error{"env": ErrDenied, "statel": ErrDenied, "loop1": ErrSymlinkLoop, "dangling": fs.ErrNotExist, "tmp/other": unix.EACCES} {
			if _, err := f.StatFollow(ctx, u, p); !errors.Is(err, want) {
				t.Errorf("StatFollow(%s): %v, want %v", p, err, want)
			}
		}

		// ListDir follows links to the directory, keeps the requested
		// prefix and reports links inside as links.
		list, err := f.ListDir(ctx, u, "current", 2)
		if err != nil || len(list) != 2 || list[0].Name != "app.txt" || list[0].Path != filepath.Join(home, "current/app.txt") ||
			list[1].Name != "back" || list[1].Type != TypeSymlink || list[1].SymlinkTarget != "../../data.csv" {
			t.Errorf("ListDir(current) = %+v, %v", list, err)
		}
		if list, err := f.ListDir(ctx, u, "here", 1); err != nil || !slices.ContainsFunc(list, func(e Entry) bool { return e.Name == "current" && e.Type == TypeSymlink }) {
			t.Errorf("ListDir(here): %d entries, %v", len(list), err)
		}
		list, err = f.ListDir(ctx, u, "stateparent", 2)
		if err != nil {
			t.Errorf("ListDir(stateparent): %v", err)
		}
		for _, e := range list {
			if e.Name == stateBase || strings.Contains(e.Path, stateBase+"/") {
				t.Errorf("ListDir(stateparent) shows the state dir: %+v", e)
			}
		}
		for p, want := range map[string]error{"devdir": ErrDenied, "p1": ErrDenied, "statedir": ErrDenied, "latest.csv": ErrNotDir, "loop1": ErrSymlinkLoop, "dangling": fs.ErrNotExist} {
			if _, err := f.ListDir(ctx, u, p, 1); !errors.Is(err, want) {
				t.Errorf("ListDir(%s): %v, want %v", p, err, want)
			}
		}
	})

	// As rayd's own identity (root, no fsuid switch) the policy alone
	// keeps every denied target out, and the sticky-directory rule holds.
	f := newFS(t, Options{RaydDirs: []string{tr.state}})
	for _, c := range bad {
		if _, _, err := readAll(t, f, u, c.path); !errors.Is(err, c.err) {
			t.Errorf("as root: ReadFile(%s) = %v; want %v", c.path, err, c.err)
		}
	}
	// ... while the root-only file, refused to the user above, is readable:
	// the EACCES came from the user's identity.
	if got, _, err := readAll(t, f, u, "secretl"); err != nil || got != "root secret" {
		t.Errorf("as root: ReadFile(secretl) = %q, %v", got, err)
	}
}

// TestWritesRefuseLinks: the write side is as strict as before: no link
// above the last component; a link as the last component is acted on as
// itself, never through.
func TestWritesRefuseLinks(t *testing.T) {
	tr := newFollowTree(t)
	u, home := tr.u, tr.home
	h := func(p string) string { return filepath.Join(home, p) }
	for _, l := range []string{"wlink", "rmlink", "mvlink"} {
		symlink(t, "data.csv", h(l), testUID)
	}
	symlink(t, "releases", h("rmdirlink"), testUID)
	f := newFS(t, Options{Privileged: true, RaydDirs: []string{tr.state}})
	ctx := context.Background()
	sym := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrSymlink) || errors.Is(err, ErrSymlinkLoop) {
			t.Errorf("%s: %v, want ErrSymlink", what, err)
		}
	}
	_, err := f.WriteFile(ctx, u, "current/new.txt", strings.NewReader("x"), 0, nil)
	sym("WriteFile(current/new.txt)", err)
	_, err = f.WriteFile(ctx, u, "etc/x", strings.NewReader("x"), 0, nil)
	sym("WriteFile(etc/x)", err)
	_, err = f.WriteFile(ctx, u, "statedir/token", strings.NewReader("x"), 0, nil)
	sym("WriteFile(statedir/token)", err)
	_, err = f.MakeDir(ctx, u, "current/newdir")
	sym("MakeDir(current/newdir)", err)
	_, err = f.Move(ctx, u, "current/app.txt", "moved")
	sym("Move(current/app.txt, moved)", err)
	_, err = f.Move(ctx, u, "data.csv", "current/x")
	sym("Move(data.csv, current/x)", err)
	sym("Remove(current/app.txt)", f.Remove(ctx, u, "current/app.txt", false))
	sym("Remove(current/back, recursive)", f.Remove(ctx, u, "current/back", true))
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	_, err = f.AddWatch(u, in, "current", unix.IN_CREATE)
	sym("AddWatch(current)", err)
	_, err = f.AddWatch(u, in, "current/..", unix.IN_CREATE)
	if !errors.Is(err, ErrDotDot) {
		t.Errorf("AddWatch(current/..): %v", err)
	}
	if des, _ := os.ReadDir(h("releases/v2")); len(des) != 2 {
		t.Errorf("releases/v2 changed: %v", des)
	}
	if b, _ := os.ReadFile(filepath.Join(tr.state, "token")); string(b) != "STATE-SECRET" {
		t.Errorf("state token changed: %q", b)
	}

	// A write to a link replaces the link, not its target.
	if _, err := f.WriteFile(ctx, u, "wlink", strings.NewReader("new"), 0, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(h("wlink")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("wlink after write: %v %v", fi, err)
	}
	// Remove of a link removes the link; recursive Remove of a link to a
	// directory too, and nothing under the directory.
	if err := f.Remove(ctx, u, "rmlink", false); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, u, "rmdirlink", true); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rmlink", "rmdirlink"} {
		if _, err := os.Lstat(h(p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	// Move of a link moves the link.
	if e, err := f.Move(ctx, u, "mvlink", "mvlink2"); err != nil || e.Type != TypeSymlink || e.SymlinkTarget != "data.csv" {
		t.Errorf("Move(mvlink) = %+v, %v", e, err)
	}
	if b, err := os.ReadFile(h("data.csv")); err != nil || string(b) != "a,b\n" {
		t.Errorf("data.csv changed: %q %v", b, err)
	}
	if b, err := os.ReadFile(h("releases/v2/app.txt")); err != nil || string(b) != "v2" {
		t.Errorf("app.txt changed: %q %v", b, err)
	}
}

// TestFollowRace swaps, while reads run: (1) a link between a harmless
// target and a denied one, (2) a directory of the walk for another one at
// a different depth, between the walk's descent and a ".." of a link
// target. A read must only ever return the harmless data or fail cleanly.
// It runs privileged and as root (where only the policy protects).
func TestFollowRace(t *testing.T) {
	u, home := userHome(t)
	state := t.TempDir()
	os.Chmod(state, 0o755)
	mustWrite(t, filepath.Join(state, "token"), "STATE-SECRET", 0o644)
	h := func(p string) string { return filepath.Join(home, p) }
	for _, d := range []string{"w/sub", "v/deep/sub"} {
		if err := os.MkdirAll(h(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, h("data.csv"), "good", 0o644)
	mustWrite(t, h("v/data.csv"), "WRONG", 0o644)
	symlink(t, "data.csv", h("l"), testUID)
	symlink(t, filepath.Join(state, "token"), h("l2"), testUID)
	// From w/sub, ../../data.csv is HOME/data.csv; the same directory moved
	// to v/deep/sub would physically lead to v/data.csv.
	symlink(t, "../../data.csv", h("w/sub/ln"), testUID)
	symlink(t, "../../data.csv", h("v/deep/sub/ln"), testUID)
	chownTree(t, home, testUID)
	dur := time.Second
	if testing.Short() {
		dur = 300 * time.Millisecond
	}
	for _, v := range []struct {
		name           string
		priv, fallback bool
	}{{"privileged", true, false}, {"as-root", false, false}, {"as-root-openat", false, true}} {
		t.Run(v.name, func(t *testing.T) {
			f := newFS(t, Options{Privileged: v.priv, RaydDirs: []string{state}})
			f.noOpenat2.Store(v.fallback)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var swaps, reads, rejects atomic.Int64
			swapper := func(a, b string) {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("exchange: %v", err)
						return
					}
					swaps.Add(1)
				}
			}
			wg.Go(func() { swapper(h("l"), h("l2")) })
			wg.Go(func() { swapper(h("w/sub"), h("v/deep/sub")) })
			for _, p := range []string{"l", "w/sub/ln"} {
				for range 2 {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							got, _, err := readAll(t, f, u, p)
							if err != nil {
								if !errors.Is(err, ErrDenied) && !errors.Is(err, ErrSymlink) && !errors.Is(err, fs.ErrNotExist) {
									t.Errorf("read %s: unexpected error %v", p, err)
								}
								rejects.Add(1)
								continue
							}
							if got != "good" {
								t.Errorf("read %s returned %q", p, got)
							}
							reads.Add(1)
						}
					})
				}
			}
			time.Sleep(dur)
			close(stop)
			wg.Wait()
			t.Logf("swaps=%d reads=%d rejected=%d", swaps.Load(), reads.Load(), rejects.Load())
			if reads.Load() == 0 || rejects.Load() == 0 {
				t.Errorf("race did not exercise both outcomes")
			}
		})
	}
}

// TestFollowBindMountedProc: a link into a proc file system mounted
// elsewhere is refused by file system type.
func TestFollowBindMountedProc(t *testing.T) {
	if !inMountNS(t) {
		return
	}
	u, home := userHome(t)
	if err := os.Mkdir(filepath.Join(home, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	mountAt(t, "/proc", filepath.Join(home, "p"), "", unix.MS_BIND|unix.MS_REC, "")
	symlink(t, "p/self/environ", filepath.Join(home, "pl"), testUID)
	symlink(t, "p", filepath.Join(home, "pd"), testUID)
	symlink(t, filepath.Join(home, "p/self/fd/0"), filepath.Join(home, "pfd"), testUID)
	modes(t, Options{Privileged: true}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		for _, p := range []string{"pl", "pd/self/environ", "pfd"} {
			if _, _, err := f.ReadFile(ctx, u, p); !errors.Is(err, ErrDenied) || reasonOf(err) != "fstype" {
				t.Errorf("ReadFile(HOME/%s): %v, want ErrDenied (fstype)", p, err)
			}
		}
		if _, err := f.ListDir(ctx, u, "pd", 1); !errors.Is(err, ErrDenied) {
			t.Errorf("ListDir(HOME/pd): %v, want ErrDenied", err)
		}
	})
	// As root too.
	f := newFS(t, Options{})
	if _, _, err := f.ReadFile(context.Background(), u, "pl"); !errors.Is(err, ErrDenied) {
		t.Errorf("as root: ReadFile(HOME/pl): %v, want ErrDenied", err)
	}
}
