package safefs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const testUID = 1000

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: switches fsuid, chowns and mounts")
	}
}

// userHome returns a home directory owned by uid 1000 (reachable by it)
// and the matching User.
func userHome(t *testing.T) (User, string) {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, testUID, testUID); err != nil {
		t.Fatal(err)
	}
	return User{UID: testUID, GID: testUID, Groups: []uint32{testUID}, Home: dir}, dir
}

func newFS(t *testing.T, opts Options) *FS {
	t.Helper()
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// modes runs fn with openat2 and with the openat fallback.
func modes(t *testing.T, opts Options, fn func(t *testing.T, f *FS)) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "openat"
		}
		t.Run(name, func(t *testing.T) {
			f := newFS(t, opts)
			f.noOpenat2.Store(fallback)
			fn(t, f)
		})
	}
}

func mustWrite(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tempPrefix) {
			out = append(out, de.Name())
		}
	}
	return out
}

func TestResolve(t *testing.T) {
	f := newFS(t, Options{RaydDirs: []string{"/run/rayd"}})
	u := User{UID: 1000, GID: 1000, Home: "/home/user"}
	long := "/home/user/" + strings.Repeat("a", MaxPathLen)
	cases := []struct {
		in, want string
		err      error
		reason   string
	}{
		{"/home/user/x", "/home/user/x", nil, ""},
		{"x/y", "/home/user/x/y", nil, ""},
		{"./x//y/.", "/home/user/x/y", nil, ""},
		{"/", "/", nil, ""},
		{"/tmp/", "/tmp", nil, ""},
		{"/run/rayd2", "/run/rayd2", nil, ""},
		{"/procfoo", "/procfoo", nil, ""},
		{"", "", ErrInvalidPath, "empty"},
		{long, "", ErrInvalidPath, "too_long"},
		{"/home/user/a\x00b", "", ErrInvalidPath, "nul"},
		{"/home/user/../../etc/shadow", "", ErrDenied, "dotdot"},
		{"..", "", ErrDenied, "dotdot"},
		{"a/..", "", ErrDenied, "dotdot"},
		{"/proc", "", ErrDenied, "denied"},
		{"/proc/1/environ", "", ErrDenied, "denied"},
		{"/proc/", "", ErrDenied, "denied"},
		{"//proc//self", "", ErrDenied, "denied"},
		{"/./proc/./self", "", ErrDenied, "denied"},
		{"/etc/shadow", "/etc/shadow", nil, ""}, // read-only: see below
		{"/usr/bin/x", "/usr/bin/x", nil, ""},
		{"/sys/kernel", "", ErrDenied, "denied"},
		{"/dev/pts/0", "", ErrDenied, "denied"},
		{"/run/rayd/token", "", ErrDenied, "denied"},
		{"/run/rayd", "", ErrDenied, "denied"},
	}
	for _, c := range cases {
		got, err := f.Resolve(u, c.in)
		if c.err == nil {
			if err != nil || got != c.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			continue
		}
		var pe *PathError
		if !errors.Is(err, c.err) || !errors.As(err, &pe) || pe.Reason != c.reason {
			t.Errorf("Resolve(%q) = %q, %v; want %v (%s)", c.in, got, err, c.err, c.reason)
		}
		if errors.Is(c.err, ErrDenied) && !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Resolve(%q): %v does not match fs.ErrPermission", c.in, err)
		}
		if err != nil && strings.Contains(err.Error(), "/") {
			t.Errorf("error message contains a path: %q", err)
		}
	}
	// Relative paths need an absolute home; a home under a denied prefix
	// denies everything relative.
	if _, err := f.Resolve(User{}, "x"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("relative without home: %v", err)
	}
	if _, err := f.Resolve(User{Home: "/proc/u"}, "x"); !errors.Is(err, ErrDenied) {
		t.Errorf("relative under denied home: %v", err)
	}
	// Operations that write refuse the read-only prefixes as well.
	for _, p := range []string{"/etc", "/etc/shadow", "/usr/bin/x", "/proc/1"} {
		var pe *PathError
		if _, err := f.resolveWrite(u, p); !errors.Is(err, ErrDenied) || !errors.As(err, &pe) {
			t.Errorf("resolveWrite(%q): %v, want ErrDenied", p, err)
		}
	}
	if c, err := f.resolveWrite(u, "/etcx/y"); err != nil || c != "/etcx/y" {
		t.Errorf("resolveWrite(/etcx/y) = %q, %v", c, err)
	}
	if _, err := New(Options{Deny: []string{"relative"}}); err == nil {
		t.Error("New accepted a relative deny entry")
	}
}

func TestValidateMetadata(t *testing.T) {
	big := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		big[strings.Repeat("k", 1+i%60)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	cases := []struct {
		md map[string]string
		ok bool
	}{
		{nil, true},
		{map[string]string{"a": "b", "x.y-z_0": "hello world ~"}, true},
		{map[string]string{"": "v"}, false},
		{map[string]string{"A": "v"}, false},
		{map[string]string{"a/b": "v"}, false},
		{map[string]string{strings.Repeat("k", 65): "v"}, false},
		{map[string]string{"k": "tab\there"}, false},
		{map[string]string{"k": "é"}, false},
		{map[string]string{"k": strings.Repeat("v", 4000)}, false},
		{map[string]string{"k": strings.Repeat("v", 4000-len(MetadataPrefix)-1)}, true},
		{big, false},
	}
	for i, c := range cases {
		err := ValidateMetadata(c.md)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidMetadata)) {
			t.Errorf("case %d: %v, want ok=%v", i, err, c.ok)
		}
	}
}

func TestPermString(t *testing.T) {
	cases := map[uint32]string{
		unix.S_IFREG | 0o644:                "-rw-r--r--",
		unix.S_IFDIR | 0o755:                "drwxr-xr-x",
		unix.S_IFLNK | 0o777:                "lrwxrwxrwx",
		unix.S_IFDIR | 0o1777:               "drwxrwxrwt",
		unix.S_IFREG | 0o4755:               "-rwsr-xr-x",
		unix.S_IFREG | unix.S_ISGID | 0o640: "-rw-r-S---",
	}
	for m, want := range cases {
		if got := permString(m); got != want {
			t.Errorf("permString(%o) = %q, want %q", m, got, want)
		}
	}
}

func TestDeniedReads(t *testing.T) {
	u, home := userHome(t)
	// A root-only file outside the deny list.
	rootDir := t.TempDir()
	os.Chmod(rootDir, 0o755)
	mustWrite(t, filepath.Join(rootDir, "x"), "root secret", 0o600)
	for _, l := range [][2]string{{"/etc/shadow", "shadow"}, {"/proc/1/environ", "environ"}, {"/proc", "proc"}, {filepath.Join(rootDir, "x"), "rootx"}} {
		if err := os.Symlink(l[0], filepath.Join(home, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	modes(t, Options{Privileged: true}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		for _, p := range []string{"/proc/1/environ", "/proc/self/root/etc/shadow"} {
			if _, _, err := f.ReadFile(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("ReadFile(%s): %v, want ErrDenied", p, err)
			}
		}
		// /etc is read-only, not denied: the kernel refuses /etc/shadow to
		// the user, as it refuses `cat /etc/shadow`.
		if _, _, err := f.ReadFile(ctx, u, "/etc/shadow"); !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrDenied) {
			t.Errorf("ReadFile(/etc/shadow): %v, want EACCES", err)
		}
		// Links are followed for reads, but never into a denied prefix,
		// and the target is opened with the user's identity.
		for _, p := range []string{"environ", "proc/1/environ", "proc/self/environ", "proc"} {
			if _, _, err := f.ReadFile(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("ReadFile(HOME/%s): %v, want ErrDenied", p, err)
			}
		}
		for _, p := range []string{"shadow", "rootx"} {
			if _, _, err := f.ReadFile(ctx, u, p); !errors.Is(err, unix.EACCES) || errors.Is(err, ErrDenied) {
				t.Errorf("ReadFile(HOME/%s): %v, want EACCES", p, err)
			}
		}
		// Stat reports the link itself.
		e, err := f.Stat(ctx, u, "shadow")
		if err != nil || e.Type != TypeSymlink || e.SymlinkTarget != "/etc/shadow" || e.Perm[0] != 'l' {
			t.Errorf("Stat(link) = %+v, %v", e, err)
		}
		// The kernel checks the user's permissions: EACCES, not a policy
		// denial.
		_, _, err = f.ReadFile(ctx, u, filepath.Join(rootDir, "x"))
		if !errors.Is(err, unix.EACCES) || errors.Is(err, ErrDenied) {
			t.Errorf("ReadFile(root-only): %v, want EACCES", err)
		}
		if _, err := f.WriteFile(ctx, u, filepath.Join(rootDir, "y"), strings.NewReader("x"), 0, nil); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("WriteFile into root dir: %v, want EACCES", err)
		}
	})
	// Unprivileged (operating as root itself) the same file is readable:
	// proof that the EACCES above came from the fsuid switch.
	f := newFS(t, Options{})
	rc, _, err := f.ReadFile(context.Background(), u, filepath.Join(rootDir, "x"))
	if err != nil {
		t.Fatalf("unprivileged ReadFile: %v", err)
	}
	rc.Close()
}

func TestOwnershipAndOps(t *testing.T) {
	u, home := userHome(t)
	modes(t, Options{Privileged: true}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		base := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		e, err := f.WriteFile(ctx, u, base+"/x/y/file.txt", strings.NewReader("hello"), 0o640, map[string]string{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		if e.Size != 5 || e.Type != TypeFile || e.Perm != "-rw-r-----" || e.Metadata["k"] != "v" || e.Path != filepath.Join(home, base, "x/y/file.txt") {
			t.Errorf("entry %+v", e)
		}
		for _, p := range []string{base, base + "/x", base + "/x/y", base + "/x/y/file.txt"} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(home, p), &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != testUID || st.Gid != testUID {
				t.Errorf("%s owned by %d:%d, want 1000:1000", p, st.Uid, st.Gid)
			}
		}
		// MakeDir.
		if _, err := f.MakeDir(ctx, u, base+"/x"); !errors.Is(err, ErrExist) {
			t.Errorf("MakeDir existing: %v", err)
		}
		if _, err := f.MakeDir(ctx, u, base+"/x/y/file.txt/sub"); !errors.Is(err, ErrNotDir) {
			t.Errorf("MakeDir under file: %v", err)
		}
		if _, err := f.MakeDir(ctx, u, base+"/x/y/file.txt"); !errors.Is(err, ErrNotDir) {
			t.Errorf("MakeDir on file: %v", err)
		}
		d, err := f.MakeDir(ctx, u, base+"/m/n")
		if err != nil || d.Type != TypeDir || d.UID != testUID {
			t.Errorf("MakeDir: %+v %v", d, err)
		}
		// ListDir.
		list, err := f.ListDir(ctx, u, base, 0)
		if err != nil || len(list) != 2 || list[0].Name != "m" || list[1].Name != "x" {
			t.Errorf("ListDir depth 1: %v %v", list, err)
		}
		list, err = f.ListDir(ctx, u, base, 3)
		if err != nil || len(list) != 5 {
			t.Errorf("ListDir depth 3: %d entries, %v", len(list), err)
		}
		small := newFS(t, Options{Privileged: true, MaxListEntries: 3})
		if _, err := small.ListDir(ctx, u, base, 3); !errors.Is(err, ErrTooMany) {
			t.Errorf("ListDir cap: %v", err)
		}
		// Move and Stat.
		if _, err := f.Move(ctx, u, base+"/x/y/file.txt", base+"/m/moved"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Stat(ctx, u, base+"/x/y/file.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat moved source: %v", err)
		}
		s, err := f.Stat(ctx, u, base+"/m/moved")
		if err != nil || s.Metadata["k"] != "v" || s.Owner == "" {
			t.Errorf("Stat moved: %+v %v", s, err)
		}
		if _, err := f.Move(ctx, u, base+"/m/moved", "/etc/moved"); !errors.Is(err, ErrDenied) {
			t.Errorf("Move to /etc: %v", err)
		}
		// Remove never follows symlinks while recursing.
		outside := t.TempDir()
		mustWrite(t, filepath.Join(outside, "keep"), "k", 0o644)
		os.Chown(outside, testUID, testUID)
		os.Chown(filepath.Join(outside, "keep"), testUID, testUID)
		if err := os.Symlink(outside, filepath.Join(home, base, "m/link")); err != nil {
			t.Fatal(err)
		}
		if err := f.Remove(ctx, u, base+"/m", false); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("Remove non-empty: %v", err)
		}
		if err := f.Remove(ctx, u, base, true); err != nil {
			t.Fatalf("Remove recursive: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
			t.Errorf("Remove followed a symlink: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(home, base)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("tree not removed: %v", err)
		}
	})
}

// TestRace swaps HOME/a between a real directory and a symlink to a
// root-only directory, which is also on the deny list (as rayd's state
// directory is), while reads and writes go through HOME/a. Writes refuse
// the link; reads follow it and must then be refused by policy. It also
// runs unprivileged (as root, so the kernel's permission checks would not
// save a broken walk), with openat2 and with the openat fallback.
func TestRace(t *testing.T) {
	u, home := userHome(t)
	secretDir := t.TempDir()
	os.Chmod(secretDir, 0o700)
	const secret = "TOPSECRET"
	mustWrite(t, filepath.Join(secretDir, "secret"), secret, 0o600)
	if err := os.Mkdir(filepath.Join(home, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(home, "a", "secret"), "public", 0o644)
	os.Chown(filepath.Join(home, "a"), testUID, testUID)
	os.Chown(filepath.Join(home, "a", "secret"), testUID, testUID)
	if err := os.Symlink(secretDir, filepath.Join(home, "b")); err != nil {
		t.Fatal(err)
	}
	dur := time.Second
	if testing.Short() {
		dur = 300 * time.Millisecond
	}
	for _, v := range []struct {
		name           string
		priv, fallback bool
	}{{"privileged", true, false}, {"as-root", false, false}, {"as-root-openat", false, true}} {
		t.Run(v.name, func(t *testing.T) {
			f := newFS(t, Options{Privileged: v.priv, RaydDirs: []string{secretDir}})
			f.noOpenat2.Store(v.fallback)
			ctx := context.Background()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var swaps, reads, writes, rejects atomic.Int64
			wg.Go(func() {
				a, b := filepath.Join(home, "a"), filepath.Join(home, "b")
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
			})
			okErr := func(err error) bool {
				return errors.Is(err, ErrSymlink) || errors.Is(err, fs.ErrNotExist)
			}
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						rc, _, err := f.ReadFile(ctx, u, "a/secret")
						if err != nil {
							if !okErr(err) && !errors.Is(err, ErrDenied) {
								t.Errorf("read: unexpected error %v", err)
							}
							rejects.Add(1)
							continue
						}
						b, _ := io.ReadAll(rc)
						rc.Close()
						if bytes.Contains(b, []byte(secret)) {
							t.Errorf("read returned the secret")
						}
						reads.Add(1)
					}
				})
			}
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, err := f.WriteFile(ctx, u, "a/f", strings.NewReader("data"), 0o644, nil)
						if err != nil {
							if !okErr(err) {
								t.Errorf("write: unexpected error %v", err)
							}
							rejects.Add(1)
							continue
						}
						writes.Add(1)
					}
				})
			}
			time.Sleep(dur)
			close(stop)
			wg.Wait()
			t.Logf("swaps=%d reads=%d writes=%d rejected=%d", swaps.Load(), reads.Load(), writes.Load(), rejects.Load())
			if reads.Load() == 0 || writes.Load() == 0 || rejects.Load() == 0 {
				t.Errorf("race did not exercise both outcomes")
			}
			des, err := os.ReadDir(secretDir)
			if err != nil || len(des) != 1 || des[0].Name() != "secret" {
				t.Errorf("root-only dir was written to: %v %v", des, err)
			}
			for _, n := range []string{"a", "b"} {
				if fi, err := os.Lstat(filepath.Join(home, n)); err == nil && fi.IsDir() {
					if tf := tempFiles(t, filepath.Join(home, n)); len(tf) != 0 {
						t.Errorf("temp files left: %v", tf)
					}
				}
			}
		})
	}
}

// inMountNS re-runs the calling test in a child process with a private
// mount namespace and reports whether the caller is that child.
func inMountNS(t *testing.T) bool {
	t.Helper()
	if os.Getenv("SAFEFS_MOUNTNS_TEST") == t.Name() {
		return true
	}
	needRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAFEFS_MOUNTNS_TEST="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("operation not permitted")) {
			t.Skipf("needs root: cannot create a mount namespace: %v", err)
		}
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("child did not pass:\n%s", out)
	}
	return false
}

func mountAt(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s: %v", fstype+source, err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
}

func TestPseudoFSBindMounts(t *testing.T) {
	if !inMountNS(t) {
		return
	}
	u, home := userHome(t)
	for _, d := range []string{"p", "pts", "cg"} {
		if err := os.Mkdir(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountAt(t, "/proc", filepath.Join(home, "p"), "", unix.MS_BIND|unix.MS_REC, "")
	mountAt(t, "/dev/pts", filepath.Join(home, "pts"), "", unix.MS_BIND, "")
	mountAt(t, "none", filepath.Join(home, "cg"), "cgroup2", 0, "")
	mustWrite(t, filepath.Join(home, "ok"), "fine", 0o644)
	modes(t, Options{Privileged: true}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		for _, p := range []string{"p", "p/self/environ", "p/1/environ", "pts", "pts/ptmx", "cg", "cg/cgroup.procs"} {
			if _, err := f.Stat(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("Stat(HOME/%s): %v, want ErrDenied", p, err)
			}
			if _, _, err := f.ReadFile(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("ReadFile(HOME/%s): %v, want ErrDenied", p, err)
			}
			if _, err := f.ListDir(ctx, u, p, 1); !errors.Is(err, ErrDenied) {
				t.Errorf("ListDir(HOME/%s): %v, want ErrDenied", p, err)
			}
		}
		if _, err := f.WriteFile(ctx, u, "p/self/attr/current", strings.NewReader("x"), 0, nil); !errors.Is(err, ErrDenied) {
			t.Errorf("WriteFile into proc: %v", err)
		}
		if err := f.Remove(ctx, u, "p", true); !errors.Is(err, ErrDenied) {
			t.Errorf("Remove proc mount: %v", err)
		}
		if _, err := f.Move(ctx, u, "p", "q"); !errors.Is(err, ErrDenied) {
			t.Errorf("Move proc mount: %v", err)
		}
		// Listing HOME omits the pseudo file systems.
		list, err := f.ListDir(ctx, u, ".", 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			if e.Name != "ok" {
				t.Errorf("ListDir(HOME) shows %s", e.Name)
			}
		}
	})
}

func TestIdentityRestored(t *testing.T) {
	u, home := userHome(t)
	f := newFS(t, Options{Privileged: true})
	for range 50 {
		if _, err := f.Stat(context.Background(), u, "."); err != nil {
			t.Fatal(err)
		}
	}
	// After many switches rayd's own identity is intact on this thread and
	// new files created directly are root's.
	mustWrite(t, filepath.Join(home, "rootfile"), "x", 0o600)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(home, "rootfile"), &st); err != nil || st.Uid != 0 {
		t.Errorf("root file owned by %d: %v", st.Uid, err)
	}
	// A panic inside an identity switch propagates after restoring.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic not propagated")
			}
		}()
		_ = f.runAs(u, func() error { panic("boom") })
	}()
	err := f.runAs(u, func() error {
		c, err := currentCreds()
		if err != nil || c.fsuid != testUID || c.fsgid != testUID || len(c.groups) != 1 || c.groups[0] != testUID {
			t.Errorf("creds inside = %+v, %v", c, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadOnly: /etc and /usr can be read, listed and stat'ed, but nothing
// there is written, made, moved or removed; /proc, /sys and /dev stay
// denied for reads too.
func TestReadOnly(t *testing.T) {
	u, home := userHome(t)
	mustWrite(t, filepath.Join(home, "mine"), "x", 0o644)
	modes(t, Options{Privileged: true}, func(t *testing.T, f *FS) {
		ctx := context.Background()
		rc, e, err := f.ReadFile(ctx, u, "/etc/passwd")
		if err != nil || e.Type != TypeFile {
			t.Fatalf("ReadFile(/etc/passwd) = %+v, %v", e, err)
		}
		rc.Close()
		if _, err := f.Stat(ctx, u, "/usr"); err != nil {
			t.Errorf("Stat(/usr): %v", err)
		}
		if _, err := f.ListDir(ctx, u, "/etc", 1); err != nil {
			t.Errorf("ListDir(/etc): %v", err)
		}
		if _, err := f.WriteFile(ctx, u, "/etc/rayito-test", strings.NewReader("x"), 0o644, nil); !errors.Is(err, ErrDenied) {
			t.Errorf("WriteFile(/etc/...): %v, want ErrDenied", err)
		}
		if _, err := f.MakeDir(ctx, u, "/usr/rayito-test"); !errors.Is(err, ErrDenied) {
			t.Errorf("MakeDir(/usr/...): %v, want ErrDenied", err)
		}
		if err := f.Remove(ctx, u, "/etc/passwd", false); !errors.Is(err, ErrDenied) {
			t.Errorf("Remove(/etc/passwd): %v, want ErrDenied", err)
		}
		if _, err := f.Move(ctx, u, "mine", "/etc/mine"); !errors.Is(err, ErrDenied) {
			t.Errorf("Move(HOME/mine, /etc/mine): %v, want ErrDenied", err)
		}
		if _, err := f.Move(ctx, u, "/etc/passwd", "stolen"); !errors.Is(err, ErrDenied) {
			t.Errorf("Move(/etc/passwd, HOME): %v, want ErrDenied", err)
		}
		for _, p := range []string{"/proc/self/status", "/sys/kernel", "/dev/null"} {
			if _, err := f.Stat(ctx, u, p); !errors.Is(err, ErrDenied) {
				t.Errorf("Stat(%s): %v, want ErrDenied", p, err)
			}
		}
	})
}
