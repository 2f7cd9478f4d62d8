package wire

import (
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// The broker hands the helper connections rayd dialed; a failed dial is
// ErrBroker, and the helper's side ends when rayd stops.
func TestBroker(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	var fail atomic.Bool
	dial := func(ctx context.Context) (net.Conn, error) {
		if fail.Load() {
			return b, nil // not a file-backed connection: Fail
		}
		var d net.Dialer
		return d.DialContext(ctx, "unix", ln.Addr().String())
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { Serve(os.NewFile(uintptr(pair[0]), "rayd"), dial, stop); close(done) }()
	br := NewBroker(pair[1])
	c, err := br.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q %v", buf, err)
	}
	c.Close()
	fail.Store(true)
	if _, err := br.Dial(context.Background()); err != ErrBroker {
		t.Fatalf("failed dial: %v", err)
	}
	close(stop)
	<-done
	if _, err := br.Dial(context.Background()); err != ErrBroker {
		t.Fatalf("after stop: %v", err)
	}
}

func TestClassOfExit(t *testing.T) {
	for code, want := range map[int]string{0: "failed", 1: "failed", ExitNetwork: "network", ExitIAMDenied: "iam_denied", ExitNotFound: "not_found", -1: "failed"} {
		if got := ClassOfExit(code); got != want {
			t.Errorf("%d: %q", code, got)
		}
	}
}
