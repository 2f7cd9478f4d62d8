package hooks

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func dialFrom(t *testing.T, from, base string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether c gets EOF (or a reset) within d.
func closedByServer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c) // nil at EOF
	return err == nil || errors.Is(err, syscall.ECONNRESET)
}

func stillOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSlowlorisIsCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	base, _, _ := startServer(t, Options{Lifecycle: newFake(), ReadHeaderTimeout: timeout})
	c := dialFrom(t, fromPlatform, base)
	start := time.Now()
	if _, err := io.WriteString(c, "POST "+PathPrefix+"run HTTP/1.1\r\nHost: x\r\nContent-"); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(c, 10*time.Second) {
		t.Fatal("partial header was not cut")
	}
	if el := time.Since(start); el < timeout-50*time.Millisecond || el > 5*time.Second {
		t.Errorf("cut after %v, want about %v", el, timeout)
	}
}

func TestMaxConns(t *testing.T) {
	const max = 3
	base, _, owners := startServer(t, Options{Lifecycle: newFake(), MaxConns: max, ReadHeaderTimeout: time.Minute})
	var conns []net.Conn
	for range max {
		conns = append(conns, dialFrom(t, fromPlatform, base))
	}
	// Identification happens at accept: all max are in.
	waitFor(t, "accepts", func() bool { return owners.calls.Load() == max })
	extra := dialFrom(t, fromPlatform, base)
	if !closedByServer(extra, 5*time.Second) {
		t.Fatal("connection over MaxConns was not closed")
	}
	if owners.calls.Load() != max {
		t.Errorf("the extra connection was looked up (%d lookups)", owners.calls.Load())
	}
	for i, c := range conns {
		if !stillOpen(c) {
			t.Errorf("connection %d was closed", i)
		}
	}
	// Closing one frees its slot.
	conns[0].Close()
	waitFor(t, "a free slot", func() bool {
		c := dialFrom(t, fromPlatform, base)
		defer c.Close()
		io.WriteString(c, "POST "+PathPrefix+"ready HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		return strings.HasPrefix(string(b), "HTTP/1.1 200 ")
	})
}

func TestSandboxCannotTakeAllConns(t *testing.T) {
	const max = 4 // non-platform callers get max/2
	f := newFake()
	base, s, owners := startServer(t, Options{Lifecycle: f, MaxConns: max, ReadHeaderTimeout: time.Minute})
	a := dialFrom(t, fromSandbox, base)
	b := dialFrom(t, fromNotFound, base)
	waitFor(t, "accepts", func() bool { return owners.calls.Load() == 2 })
	c := dialFrom(t, fromSandbox, base)
	if !closedByServer(c, 5*time.Second) {
		t.Fatal("third sandbox connection was not closed")
	}
	if !stillOpen(a) || !stillOpen(b) {
		t.Fatal("sandbox connections under the cap were closed")
	}
	// The platform still gets in, twice at once.
	p1 := dialFrom(t, fromPlatform, base)
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	if !stillOpen(p1) {
		t.Fatal("platform connection closed")
	}
	if s.Anomalies() != 0 {
		t.Errorf("anomalies = %d", s.Anomalies())
	}
}

func serveForShutdown(t *testing.T) (base string, cancel func(), errc chan error, ln net.Listener) {
	t.Helper()
	s := New(Options{Lifecycle: newFake(), PeerOwner: (&fakeOwners{}).lookup})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc = make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), cancel, errc, ln
}

func TestServeShutdown(t *testing.T) {
	base, cancel, errc, ln := serveForShutdown(t)
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeChanged, PhaseReady)
	// A keep-alive connection between requests does not hold up the shutdown.
	idle := dialFrom(t, fromPlatform, base)
	io.WriteString(idle, "POST "+PathPrefix+"validate HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	buf := make([]byte, 4096)
	if n, err := idle.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200 ") {
		t.Fatalf("keep-alive request: %q %v", buf[:n], err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(ShutdownTimeout + 2*time.Second):
		t.Fatal("Serve did not return")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("graceful shutdown took %v", el)
	}
	if !closedByServer(idle, 2*time.Second) {
		t.Error("idle connection survived the shutdown")
	}
	if _, err := net.Dial("tcp4", ln.Addr().String()); err == nil {
		t.Error("listener still open after Serve returned")
	}
}

// TestServeShutdownSilentConn: a connection that never sent a byte may be
// about to send a request, so http.Server waits for it; Serve gives up after
// ShutdownTimeout and cuts it.
func TestServeShutdownSilentConn(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ShutdownTimeout")
	}
	base, cancel, errc, _ := serveForShutdown(t)
	silent := dialFrom(t, fromPlatform, base)
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("Serve = %v", err)
		}
	case <-time.After(ShutdownTimeout + 3*time.Second):
		t.Fatal("Serve did not return")
	}
	if !closedByServer(silent, 2*time.Second) {
		t.Error("silent connection survived the shutdown")
	}
}

func TestServeListenerError(t *testing.T) {
	s := New(Options{Lifecycle: newFake()})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

// A client trickling its header a byte at a time is cut by the header
// timeout all the same (it bounds the whole header, not the gap between
// bytes), and sandbox code holding its share of connections that way does
// not lock the platform out.
func TestTricklingSandboxCannotLockOutPlatform(t *testing.T) {
	const (
		max     = 4 // non-platform callers get max/2
		timeout = 400 * time.Millisecond
	)
	base, s, owners := startServer(t, Options{Lifecycle: newFake(), MaxConns: max, ReadHeaderTimeout: timeout})
	header := "POST " + PathPrefix + "run HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 200) + "\r\n"
	type trickler struct {
		c    net.Conn
		done chan time.Duration
	}
	var ts []trickler
	for range max / 2 {
		c := dialFrom(t, fromSandbox, base)
		tr := trickler{c, make(chan time.Duration, 1)}
		start := time.Now()
		go func() {
			for i := 0; i < len(header); i++ {
				if _, err := c.Write([]byte{header[i]}); err != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			closedByServer(c, 10*time.Second)
			tr.done <- time.Since(start)
		}()
		ts = append(ts, tr)
	}
	waitFor(t, "accepts", func() bool { return owners.calls.Load() == max/2 })
	// The sandbox's share is taken: one more of its connections is refused...
	extra := dialFrom(t, fromSandbox, base)
	if !closedByServer(extra, 5*time.Second) {
		t.Fatal("a third sandbox connection was let in")
	}
	// ... while the platform still gets through, twice.
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeChanged, PhaseReady)
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	for i, tr := range ts {
		// The header needs over 2 s at this pace; the timeout cuts it first.
		if el := <-tr.done; el < timeout-50*time.Millisecond || el > timeout+1500*time.Millisecond {
			t.Errorf("trickler %d cut after %v, want about %v", i, el, timeout)
		}
	}
	if a := s.Audit(); len(a) != 2 {
		t.Errorf("audit %+v: a trickled request was served", a)
	}
}
