package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// openTunnel dials the proxy and opens a tunnel to port of host's microVM.
func (e *env) openTunnel(t *testing.T, host, token string, port int) (net.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := localplatform.OpenTunnel(ctx, c, host, token, port)
	if err == nil {
		t.Cleanup(func() { conn.Close() })
	}
	return conn, err
}

// tunnelClient is an HTTP/1.1 client whose every connection is conn.
func tunnelClient(conn net.Conn) *http.Client {
	used := false
	return &http.Client{Transport: &http.Transport{
		DisableCompression: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("one connection only")
			}
			used = true
			return conn, nil
		},
	}}
}

// echoListener is a guest port that echoes bytes back, after greeting
// when greet is set.
func echoListener(t *testing.T, greet string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if greet != "" {
					io.WriteString(c, greet)
				}
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestTunnel: an authorized tunnel carries any number of HTTP/1.1
// requests to the guest unchanged (the proxy adds no header), counts
// their bytes, and is not a request in flight once open.
func TestTunnel(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := e.openTunnel(t, endpoint, e.token(t, vmID, time.Hour, onePort(8080)), 8080)
	if err != nil {
		t.Fatal(err)
	}
	// The upgrade request ends for the meter when the handler returns,
	// which can be just after the client has the 101.
	s := e.vm.meter.Read()
	for deadline := time.Now().Add(5 * time.Second); s.InFlight != 0 && time.Now().Before(deadline); s = e.vm.meter.Read() {
		time.Sleep(5 * time.Millisecond)
	}
	if s.InFlight != 0 {
		t.Fatalf("an open tunnel is in flight: %+v", s)
	}
	c := tunnelClient(conn)
	for i, body := range []string{"first", "second", strings.Repeat("x", 300<<10)} {
		req, _ := http.NewRequest("POST", "http://"+endpoint+"/echo", strings.NewReader(body))
		req.Header.Set("X-Inside", "yes")
		res, got := do(t, c, req)
		if res.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, res.StatusCode)
		}
		ec := decodeEcho(t, got)
		if ec.Body != body || ec.Host != endpoint || ec.Header["X-Inside"][0] != "yes" {
			t.Fatalf("request %d: the guest saw %+v", i, ec)
		}
		checkNoProxyHeaders(t, ec)
	}
	if n := e.up.hits.Load(); n != 3 {
		t.Fatalf("guest hits = %d, want 3", n)
	}
	if s := e.vm.meter.Read(); s.In < 300<<10 || s.Out < 300<<10 || s.InFlight != 0 {
		t.Fatalf("meter after three requests: %+v", s)
	}
}

// TestTunnelRefusals: a tunnel is authorized exactly as a request is; a
// refusal is a TunnelError with the proxy's status, and no guest is dialed.
func TestTunnelRefusals(t *testing.T) {
	e := newEnv(t, nil)
	good := e.token(t, vmID, time.Hour, onePort(8080))
	cases := []struct {
		name, host, token string
		port, status      int
	}{
		{"bad token", endpoint, "not-a-token", 8080, 403},
		{"token of another port", endpoint, good, 8081, 403},
		{"token of another microVM", "h1only" + suffix, good, 8080, 403},
		{"hooks port, even with every port", endpoint, e.token(t, vmID, time.Hour, allPorts()), microvmsapi.HooksPort, 403},
		{"unknown endpoint", "nope" + suffix, good, 8080, 404},
		{"stopped", "stopped" + suffix, e.token(t, "microvm-stopped", time.Hour, onePort(8080)), 8080, 502},
		{"guest port closed", "down" + suffix, e.token(t, "microvm-down", time.Hour, onePort(8080)), 8080, 502},
		{"no address", "unreachable" + suffix, e.token(t, "microvm-unreachable", time.Hour, onePort(8080)), 8080, 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.openTunnel(t, tc.host, tc.token, tc.port)
			var te *localplatform.TunnelError
			if !errors.As(err, &te) || te.Status != tc.status {
				t.Fatalf("err = %v, want a TunnelError %d", err, tc.status)
			}
		})
	}
	if n := e.up.hits.Load(); n != 0 {
		t.Fatalf("guest hit %d times", n)
	}

	// Malformed tunnel requests, once authorized, are 400.
	for name, raw := range map[string]string{
		"POST":                    "POST / HTTP/1.1\r\nHost: " + endpoint + "\r\nConnection: Upgrade\r\nUpgrade: rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\nContent-Length: 0\r\n\r\n",
		"no Connection":           "GET / HTTP/1.1\r\nHost: " + endpoint + "\r\nUpgrade: rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\n\r\n",
		"a body":                  "GET / HTTP/1.1\r\nHost: " + endpoint + "\r\nConnection: Upgrade\r\nUpgrade: rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.0":                "GET / HTTP/1.0\r\nHost: " + endpoint + "\r\nConnection: Upgrade\r\nUpgrade: rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\n\r\n",
		"chunked":                 "GET / HTTP/1.1\r\nHost: " + endpoint + "\r\nConnection: Upgrade\r\nUpgrade: rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"two protocols, POST":     "POST / HTTP/1.1\r\nHost: " + endpoint + "\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket, rayito-tunnel/1\r\nX-Aws-Proxy-Auth: " + good + "\r\n\r\n",
		"unauthorized, 403 first": "GET / HTTP/1.1\r\nHost: " + endpoint + "\r\nUpgrade: rayito-tunnel/1\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			want := 400
			if strings.HasPrefix(name, "unauthorized") {
				want = 403
			}
			if res := rawRequest(t, e, raw); res.StatusCode != want {
				t.Fatalf("status %d, want %d", res.StatusCode, want)
			}
		})
	}
	if n := e.up.hits.Load(); n != 0 {
		t.Fatalf("guest hit %d times", n)
	}
}

// TestTunnelAnyPort: a tunnel to an app's port carries raw bytes both
// ways, the guest may speak first, and a half-close reaches the guest.
func TestTunnelAnyPort(t *testing.T) {
	e := newEnv(t, nil)
	e.targets["app"+suffix] = &target{id: "microvm-app", running: true, addr: echoListener(t, "hello\n")}
	conn, err := e.openTunnel(t, "app"+suffix, e.token(t, "microvm-app", time.Hour, onePort(3000)), 3000)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if l, err := br.ReadString('\n'); err != nil || l != "hello\n" {
		t.Fatalf("greeting %q, %v", l, err)
	}
	io.WriteString(conn, "ping\n")
	if l, err := br.ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("echo %q, %v", l, err)
	}
	conn.(interface{ CloseWrite() error }).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close: %q, %v (want EOF)", rest, err)
	}
}

// TestTunnelExpiry: once its token has expired a tunnel lives while bytes
// flow, and is closed once it has been quiet for tunnelQuiet.
func TestTunnelExpiry(t *testing.T) {
	e := newEnv(t, nil)
	e.targets["app"+suffix] = &target{id: "microvm-app", running: true, addr: echoListener(t, "")}
	// The minter's clock is a fixed past date: the token's expiry has
	// passed by the wall clock the tunnel goes by.
	conn, err := e.openTunnel(t, "app"+suffix, e.token(t, "microvm-app", time.Minute, onePort(3000)), 3000)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for range 6 {
		io.WriteString(conn, "ping\n")
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if l, err := br.ReadString('\n'); err != nil || l != "ping\n" {
			t.Fatalf("a flowing expired tunnel: %q, %v", l, err)
		}
		time.Sleep(tunnelQuiet / 3)
	}
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("quiet expired tunnel: %v, want it closed", err)
	}
	if d := time.Since(start); d > 5*tunnelQuiet {
		t.Fatalf("closed after %v", d)
	}
}

// TestTunnelWakes: bytes for a microVM that was paused (and auto-resumes)
// wake it before they go on.
func TestTunnelWakes(t *testing.T) {
	e := newEnv(t, nil)
	vm := &target{id: "microvm-app", running: true, autoResume: true, wakeDelay: 50 * time.Millisecond, addr: echoListener(t, "")}
	e.targets["app"+suffix] = vm
	conn, err := e.openTunnel(t, "app"+suffix, e.token(t, "microvm-app", time.Hour, onePort(3000)), 3000)
	if err != nil {
		t.Fatal(err)
	}
	vm.mu.Lock()
	vm.running = false // paused by its idle policy
	vm.mu.Unlock()
	io.WriteString(conn, "ping\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := bufio.NewReader(conn).ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("echo %q, %v", l, err)
	}
	if !vm.Running() || vm.wakeCount() != 1 {
		t.Fatalf("running %v after %d wakes", vm.Running(), vm.wakeCount())
	}
}

// TestTunnelClose: closing the proxy closes its open tunnels and refuses
// new ones; a tunnel that ends leaves the set.
func TestTunnelClose(t *testing.T) {
	e := newEnv(t, nil)
	e.targets["app"+suffix] = &target{id: "microvm-app", running: true, addr: echoListener(t, "")}
	tok := e.token(t, "microvm-app", time.Hour, onePort(3000))
	first, err := e.openTunnel(t, "app"+suffix, tok, 3000)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	second, err := e.openTunnel(t, "app"+suffix, tok, 3000)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.proxy.tunnels.count() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("open tunnels = %d, want 1 (the first was closed)", e.proxy.tunnels.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.proxy.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatal("a tunnel outlived the proxy's Close")
	}
	if n := e.proxy.tunnels.count(); n != 0 {
		t.Fatalf("open tunnels after Close = %d", n)
	}
	var te *localplatform.TunnelError
	if _, err := e.openTunnel(t, "app"+suffix, tok, 3000); !errors.As(err, &te) || te.Status != 502 {
		t.Fatalf("a tunnel after Close: %v, want 502", err)
	}
}
