//go:build linux

package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTmpfsSizes(t *testing.T) {
	got := TmpfsSizes(2 << 30)
	if want := (TmpfsLimits{Home: 1 << 30, Tmp: 512 << 20, VarTm: 256 << 20, Run: 64 << 20, Shm: 64 << 20}); got != want {
		t.Fatalf("2 GiB: %+v, want %+v", got, want)
	}
	got = TmpfsSizes(256 << 20)
	if want := (TmpfsLimits{Home: 128 << 20, Tmp: 64 << 20, VarTm: 32 << 20, Run: 16 << 20, Shm: 16 << 20}); got != want {
		t.Fatalf("256 MiB: %+v, want %+v", got, want)
	}
	if got := TmpfsSizes(1 << 20); got.Run < 1<<20 || got.Shm < 1<<20 || got.Tmp < 1<<20 || got.Home < 1<<20 {
		t.Fatalf("1 MiB: %+v", got)
	}
	if got := TmpfsSizes(0); got != (TmpfsLimits{Home: 1 << 20, Tmp: 1 << 20, VarTm: 1 << 20, Run: 1 << 20, Shm: 1 << 20}) {
		t.Fatalf("0: %+v", got)
	}
	for n, want := range map[int64]string{0: "size=1048576", -5: "size=1048576", 4096: "size=4096"} {
		if got := SizeOpt(n); got != want {
			t.Errorf("SizeOpt(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestResolvConf(t *testing.T) {
	cases := []struct{ host, upstream, want string }{
		{"nameserver 10.0.0.2\nsearch x\n", "", "nameserver 10.0.0.2\n"},
		{"nameserver 127.0.0.53\noptions edns0\n", "nameserver 192.0.2.1\nnameserver 192.0.2.2\n", "nameserver 192.0.2.1\nnameserver 192.0.2.2\n"},
		{"nameserver 127.0.0.53\n", "", "nameserver 1.1.1.1\n"},
		{"nameserver ::1\nnameserver 9.9.9.9\n", "", "nameserver 9.9.9.9\n"},
		{"", "", "nameserver 1.1.1.1\n"},
		{"nameserver 1.0.0.1\nnameserver 2.0.0.1\nnameserver 3.0.0.1\nnameserver 4.0.0.1\n", "", "nameserver 1.0.0.1\nnameserver 2.0.0.1\nnameserver 3.0.0.1\n"},
		{"nameserver fe80::1%eth0\nnameserver garbage\n", "", "nameserver 1.1.1.1\n"},
	}
	for _, c := range cases {
		if got := ResolvConf([]byte(c.host), []byte(c.upstream)); got != c.want {
			t.Errorf("ResolvConf(%q, %q) = %q, want %q", c.host, c.upstream, got, c.want)
		}
	}
}

func TestGeneratedAccounts(t *testing.T) {
	p := passwdFile("/bin/bash")
	for _, want := range []string{"root:x:0:0:", "user:x:1000:1000:user:/home/user:/bin/bash\n", "nobody:x:65534:65534:"} {
		if !strings.Contains(p, want) {
			t.Errorf("passwd lacks %q", want)
		}
	}
	if strings.Count(p, "\n") != 3 {
		t.Errorf("passwd has extra accounts:\n%s", p)
	}
	g := groupFile()
	if g != "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n" {
		t.Errorf("group:\n%s", g)
	}
}

// TestHostsFile: localhost, the sandbox's own name on 127.0.1.1, IPv6
// names.
func TestHostsFile(t *testing.T) {
	h := hostsFile("sbx-1")
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "127.0.1.1\tsbx-1\n", "::1\tlocalhost ip6-localhost ip6-loopback\n"} {
		if !strings.Contains(h, want) {
			t.Errorf("hosts lacks %q:\n%s", want, h)
		}
	}
}

// TestCopyEtc: a regular file is copied (mode 0644), a symlink
// reproduced, a missing or too large source left out.
func TestCopyEtc(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "os-release"), []byte("ID=test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/share/zoneinfo/UTC", filepath.Join(src, "localtime")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(src, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(maxEtcCopy + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	for _, name := range []string{"os-release", "localtime", "big", "missing"} {
		if err := copyEtc(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "os-release")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("os-release: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "localtime")); err != nil || target != "/usr/share/zoneinfo/UTC" {
		t.Errorf("localtime: %q %v", target, err)
	}
	for _, name := range []string{"big", "missing"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s copied: %v", name, err)
		}
	}
}

// TestReadLimited: up to max bytes, larger is an error.
func TestReadLimited(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadLimited(p, 5); err != nil || string(b) != "12345" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadLimited(p, 4); err == nil {
		t.Fatal("a file larger than max read")
	}
	if _, err := ReadLimited(p+"x", 4); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

// FuzzResolvConf: whatever the host's resolv.conf files hold, the
// sandbox's has one to three nameserver lines of plain non-loopback
// addresses and nothing else.
func FuzzResolvConf(f *testing.F) {
	f.Add([]byte("nameserver 127.0.0.53\noptions edns0\n"), []byte("nameserver 192.0.2.1\n"))
	f.Add([]byte("nameserver ::ffff:10.0.0.1\nnameserver fe80::1%eth0\n"), []byte(""))
	f.Fuzz(func(t *testing.T, host, upstream []byte) {
		out := ResolvConf(host, upstream)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) < 1 || len(lines) > 3 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("%q", out)
		}
		for _, l := range lines {
			a, ok := strings.CutPrefix(l, "nameserver ")
			if !ok || strings.ContainsAny(a, " \t%") {
				t.Fatalf("line %q", l)
			}
			if ns := nameservers([]byte(l + "\n")); len(ns) != 1 || ns[0].IsLoopback() || ns[0].String() != a {
				t.Fatalf("line %q: %v", l, ns)
			}
		}
	})
}
