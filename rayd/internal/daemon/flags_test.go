package daemon

import (
	"io"
	"net"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseFlagsReadyFD(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || cfg.ReadyFD != -1 {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-ready-fd", "7"}, getenv, io.Discard)
	if err != nil || cfg.ReadyFD != 7 {
		t.Fatalf("-ready-fd 7: %+v, %v", cfg, err)
	}
	for _, bad := range []string{"0", "1", "2", "-2", "x"} {
		if _, err := ParseFlags([]string{"-ready-fd", bad}, getenv, io.Discard); err == nil {
			t.Errorf("-ready-fd %s accepted", bad)
		}
	}
}

func TestParseFlagsHooksFD(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || cfg.HooksFD != -1 || cfg.HooksAddr != ":9000" {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-hooks-fd", "5", "-hooks-addr", ""}, getenv, io.Discard)
	if err != nil || cfg.HooksFD != 5 || cfg.HooksAddr != "" {
		t.Fatalf("-hooks-fd 5 -hooks-addr '': %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-hooks-fd", "2"},
		{"-hooks-fd", "-3"},
		{"-hooks-fd", "6", "-ready-fd", "6"},
		{"-hooks-addr", ""}, // nowhere for the platform to call
	} {
		if _, err := ParseFlags(bad, getenv, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// unixListenerFD takes a listening Unix socket over, closes the descriptor
// it was given and refuses anything else.
func TestUnixListenerFD(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	// unixListenerFD owns (and closes) the descriptor it gets: hand it a
	// duplicate and close f, or f's finalizer would later close the same
	// number again, by then perhaps another test's listener.
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := unixListenerFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Errorf("descriptor %d still open", fd)
	}
	// The listener kept is close-on-exec.
	rc, _ := got.(*net.UnixListener).SyscallConn()
	var flags int
	_ = rc.Control(func(fd uintptr) { flags, _ = unix.FcntlInt(fd, unix.F_GETFD, 0) })
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("the hooks listener is not close-on-exec")
	}
	go func() {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
		}
	}()
	if c, err := got.Accept(); err != nil {
		t.Fatalf("accept on the listener taken over: %v", err)
	} else {
		c.Close()
	}

	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	tf, err := tl.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	// The same rule: a duplicate for unixListenerFD to close, and tf
	// closed here. Handing it tf's own number closed that number twice,
	// the second time from tf's finalizer at some later GC, when the
	// number may belong to a listener or connection of the next test.
	tfd, err := unix.Dup(int(tf.Fd()))
	tf.Close()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := unixListenerFD(tfd); err == nil {
		l.Close()
		t.Error("a TCP listener was taken as the hooks' Unix listener")
	}
}

func TestParseFlagsE2B(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || !cfg.E2B || cfg.E2BAddr != ":49983" || cfg.E2BAddrSet || cfg.E2BCodeAddr != ":49999" || cfg.E2BCodeAddrSet {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-e2b=false"}, getenv, io.Discard)
	if err != nil || cfg.E2B {
		t.Fatalf("-e2b=false: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-e2b-addr", "127.0.0.1:5000", "-e2b-code-addr", "127.0.0.1:5001"}, getenv, io.Discard)
	if err != nil || !cfg.E2B || cfg.E2BAddr != "127.0.0.1:5000" || !cfg.E2BAddrSet || cfg.E2BCodeAddr != "127.0.0.1:5001" || !cfg.E2BCodeAddrSet {
		t.Fatalf("-e2b-addr: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{{"-e2b-addr", ""}, {"-e2b-code-addr", ""}, {"-e2b=maybe"}} {
		if _, err := ParseFlags(bad, getenv, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every listener whose address was not given follows the host of
// -api-addr: -api-addr 127.0.0.1:… never leaves the hooks or the E2B ports
// on every interface. Explicit addresses win; -api-addr's default keeps
// the wildcard everywhere (a microVM image).
func TestParseFlagsAddrsFollowAPIAddr(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	for _, tc := range []struct {
		args                []string
		api, hooks, e2b, cd string
	}{
		{nil, ":8080", ":9000", ":49983", ":49999"},
		{[]string{"-api-addr", "127.0.0.1:7000"}, "127.0.0.1:7000", "127.0.0.1:9000", "127.0.0.1:49983", "127.0.0.1:49999"},
		{[]string{"-api-addr", "127.0.0.1:0"}, "127.0.0.1:0", "127.0.0.1:9000", "127.0.0.1:49983", "127.0.0.1:49999"},
		{[]string{"-api-addr", "[::1]:7000"}, "[::1]:7000", "[::1]:9000", "[::1]:49983", "[::1]:49999"},
		{[]string{"-api-addr", "localhost:7000"}, "localhost:7000", "localhost:9000", "localhost:49983", "localhost:49999"},
		{[]string{"-api-addr", ":7000"}, ":7000", ":9000", ":49983", ":49999"},
		{[]string{"-api-addr", "127.0.0.1:7000", "-hooks-addr", "10.0.0.1:1", "-e2b-addr", "10.0.0.1:2", "-e2b-code-addr", "10.0.0.1:3"},
			"127.0.0.1:7000", "10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"},
		{[]string{"-api-addr", "127.0.0.1:7000", "-hooks-fd", "5", "-hooks-addr", ""}, "127.0.0.1:7000", "", "127.0.0.1:49983", "127.0.0.1:49999"},
	} {
		cfg, err := ParseFlags(tc.args, getenv, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if cfg.APIAddr != tc.api || cfg.HooksAddr != tc.hooks || cfg.E2BAddr != tc.e2b || cfg.E2BCodeAddr != tc.cd {
			t.Errorf("%q: api %q hooks %q e2b %q code %q, want %q %q %q %q", tc.args, cfg.APIAddr, cfg.HooksAddr, cfg.E2BAddr, cfg.E2BCodeAddr, tc.api, tc.hooks, tc.e2b, tc.cd)
		}
	}
	for _, bad := range []string{"", "8080", "127.0.0.1", "127.0.0.1:", "[::1"} {
		if _, err := ParseFlags([]string{"-api-addr", bad}, getenv, io.Discard); err == nil {
			t.Errorf("-api-addr %q accepted", bad)
		}
	}
}
