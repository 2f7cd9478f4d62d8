//go:build linux

package launcher

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// testBinaryCopy copies this test binary (whose TestMain calls
// MaybeRunInit: a sandbox init) into a directory of its own.
func testBinaryCopy(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "sandbox-bin")
	copyFile(t, exe, dst, 0o755)
	return dst
}

// TestOpenBinary: Options.Binary must be an absolute path to a regular
// executable file of root or of this user that nobody else can write;
// anything else is refused with ErrBinary, naming why.
func TestOpenBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	copyFile(t, "/bin/true", good, 0o755)
	notExec := filepath.Join(dir, "noexec")
	copyFile(t, "/bin/true", notExec, 0o644)
	groupW := filepath.Join(dir, "groupw")
	copyFile(t, "/bin/true", groupW, 0o775)
	otherW := filepath.Join(dir, "otherw")
	copyFile(t, "/bin/true", otherW, 0o757)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"sandbox-bin", "not an absolute path"},
		{"", "not an absolute path"},
		{filepath.Join(dir, "missing"), "no such file"},
		{dir, "not a regular file"},
		{notExec, "not executable"},
		{groupW, "writable by its group or others"},
		{otherW, "writable by its group or others"},
	} {
		f, err := openBinary(c.path)
		if err == nil {
			f.Close()
			t.Errorf("openBinary(%q) accepted it", c.path)
			continue
		}
		if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("openBinary(%q) = %v, want ErrBinary saying %q", c.path, err, c.want)
		}
	}
	for _, p := range []string{good, link} {
		f, err := openBinary(p)
		if err != nil {
			t.Fatalf("openBinary(%q): %v", p, err)
		}
		if f.Fd() < binaryMinFD {
			t.Errorf("descriptor %d, want at least %d", f.Fd(), binaryMinFD)
		}
		if flags, err := fcntlGetfd(f); err != nil || flags&syscall.FD_CLOEXEC == 0 {
			t.Errorf("descriptor not close-on-exec (%d, %v)", flags, err)
		}
		f.Close()
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		copyFile(t, "/bin/true", other, 0o755)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if f, err := openBinary(other); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			if f != nil {
				f.Close()
			}
			t.Errorf("a binary of another user: %v", err)
		}
	}
}

func fcntlGetfd(f *os.File) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFD, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// TestBinaryStamp: the probe's answer carries the binary's build stamp; a
// platform takes a binary of the same versions, or any when either side
// is a work-tree build, and names both sides otherwise.
func TestBinaryStamp(t *testing.T) {
	for _, c := range []struct {
		out, stamp string
		ok         bool
	}{
		{probeReply + "\n" + develStamp + "\n", develStamp, true},
		{probeReply + "\nlocalvm@v0.2.0 rayd@v0.2.0 proto@v0.2.0\n", "localvm@v0.2.0 rayd@v0.2.0 proto@v0.2.0", true},
		{probeReply + "\n", "", true}, // an older binary: no stamp
		{"something else\n", "", false},
		{"", "", false},
	} {
		stamp, err := probeAnswer(c.out)
		if (err == nil) != c.ok || stamp != c.stamp {
			t.Errorf("probeAnswer(%q) = %q, %v", c.out, stamp, err)
		}
	}
	if BuildStamp() != develStamp {
		t.Fatalf("a test binary's stamp is %q, want %q", BuildStamp(), develStamp)
	}
	// This binary is a work-tree build: it pairs with any.
	for _, theirs := range []string{develStamp, "", "localvm@v0.1.0 rayd@v0.1.0 proto@v0.1.0"} {
		if err := checkBinaryStamp("/x", theirs); err != nil {
			t.Errorf("stamp %q: %v", theirs, err)
		}
	}
}

// TestCheckBinary: CheckBinary accepts a sandbox init and refuses a
// binary that does not answer as one.
func TestCheckBinary(t *testing.T) {
	if err := CheckBinary(testBinaryCopy(t)); err != nil {
		t.Fatalf("CheckBinary of this test binary: %v", err)
	}
	tr := filepath.Join(t.TempDir(), "true")
	copyFile(t, "/bin/true", tr, 0o755)
	err := CheckBinary(tr)
	if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), "does not answer as a sandbox init") {
		t.Fatalf("CheckBinary(/bin/true) = %v", err)
	}
	if _, err := New(Options{StateDir: t.TempDir(), Subnet: testSubnet, Scope: testScope, Logger: testLogger(t), Binary: tr}); !errors.Is(err, ErrBinary) {
		t.Fatalf("New with /bin/true as the binary: %v, want ErrBinary", err)
	}
}

// TestSandboxFromBinary: a launcher given Options.Binary starts its
// sandboxes (init, rayd, sudo) from that file, the file it opened in New:
// replacing the path afterwards changes nothing.
func TestSandboxFromBinary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, cgroups, veth and nftables")
	}
	bin := testBinaryCopy(t)
	var st syscall.Stat_t
	if err := syscall.Stat(bin, &st); err != nil {
		t.Fatal(err)
	}
	l := newLauncher(t, "", func(o *Options) { o.Binary = bin })
	t.Cleanup(func() { _ = l.Release() })
	if !l.Privileged() {
		t.Skip("needs root: namespaces are not usable here")
	}
	// The path now names another file: sandboxes still start from the
	// binary New opened.
	copyFile(t, "/bin/true", bin+".new", 0o755)
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	t.Cleanup(func() { _ = inst.Terminate(t.Context()) })
	token := install(t, inst)
	out, end := run(t, inst.APIAddr(), token, `cat /proc/1/comm; stat -L -c %s /usr/local/bin/sudo`)
	if end["exited"] != true {
		t.Fatalf("end %v: %s", end, out)
	}
	if got := strings.Fields(out); len(got) != 2 || got[0] != "rayd" || got[1] != strconv.FormatInt(st.Size, 10) {
		t.Fatalf("sandbox: %q, want rayd and the binary's size %d", out, st.Size)
	}
	// The sudo placed in the state directory is that binary (a copy:
	// its last link is gone), and no temporary file is left.
	var sst syscall.Stat_t
	if err := syscall.Stat(filepath.Join(l.opts.StateDir, sudoStateFile), &sst); err != nil || sst.Size != st.Size {
		t.Fatalf("state directory's sudo: %d bytes (%v), want %d", sst.Size, err, st.Size)
	}
	if m, _ := filepath.Glob(filepath.Join(l.opts.StateDir, sudoStateFile+".tmp-*")); len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}
}

// TestAsUserRootlessBinary: a rootless launcher (an ordinary user) starts
// its sandboxes from Options.Binary too, through the descriptor it holds,
// from inside the unprivileged user namespace.
func TestAsUserRootlessBinary(t *testing.T) {
	asUser(t)
	exe, err := os.Executable() // TestRootless's copy, owned by this user
	if err != nil {
		t.Fatal(err)
	}
	l := rootlessLauncher(t, func(o *Options) { o.Binary = exe })
	inst := launch(t, l, newSpec(t, l))
	t.Cleanup(func() { _ = inst.Terminate(t.Context()) })
	if h := health(t, inst.APIAddr()); h["isolation"] != "ISOLATION_ROOTLESS" {
		t.Fatalf("health %v", h)
	}
}

// TestPlaceBinaryTwice: placing the same binary again (a platform
// restarted with an unchanged binary) leaves no temporary link behind: a
// rename between two links of one file does nothing.
func TestPlaceBinaryTwice(t *testing.T) {
	bin := testBinaryCopy(t)
	dir := t.TempDir()
	for range 2 {
		if _, err := placeBinary(bin, dir); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != sudoStateFile {
		t.Fatalf("state directory holds %v", entries)
	}
}
