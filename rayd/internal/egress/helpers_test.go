package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePublic is the address test names resolve to; the test Dial maps
// it to loopback listeners.
var fakePublic = netip.MustParseAddr("203.0.113.10")

// allowList allows "name:port" entries, and "name:*" for any port.
type allowList map[string]bool

func (a allowList) AllowsHost(name string, port uint16) bool {
	return a[name+":"+strconv.Itoa(int(port))] || a[name+":*"]
}

// safeBuf is a goroutine-safe log sink.
type safeBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a proxy under test with recording, loopback-only resolver and
// dialer.
type env struct {
	t       *testing.T
	p       *Proxy
	addr    string
	logs    *safeBuf
	mu      sync.Mutex
	names   map[string][]netip.Addr // name -> addresses
	ports   map[string]string       // "ip:port" the proxy may dial -> real loopback address
	resolve []string                // names resolved
	dials   []string                // addresses dialed
}

func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	e := &env{t: t, logs: &safeBuf{}, names: map[string][]netip.Addr{}, ports: map[string]string{}}
	opts := Options{
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.resolve = append(e.resolve, host)
			if as, ok := e.names[host]; ok {
				return as, nil
			}
			return nil, errors.New("no such host")
		},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			e.mu.Lock()
			e.dials = append(e.dials, address)
			real, ok := e.ports[address]
			e.mu.Unlock()
			if !ok {
				return nil, errors.New("test dial: address not mapped")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
		OriginalDst: func(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errors.New("not redirected") },
		LocalAddrs:  func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("198.51.100.7")} },
		Logger:      slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&opts)
	}
	e.p = New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- e.p.Serve(ln) }()
	t.Cleanup(func() {
		e.p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// route makes name resolve to addrs and maps fakePublic:port to real.
func (e *env) route(name string, port uint16, real string, addrs ...netip.Addr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(addrs) == 0 {
		addrs = []netip.Addr{fakePublic}
	}
	e.names[name] = addrs
	e.ports[netip.AddrPortFrom(fakePublic, port).String()] = real
}

func (e *env) resolved() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.resolve...)
}

func (e *env) dialed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.dials...)
}

func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 2*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	e.t.Cleanup(func() { c.Close() })
	return c
}

// connect sends a CONNECT and returns the connection and status line.
func (e *env) connect(authority string) (net.Conn, *bufio.Reader, string) {
	e.t.Helper()
	c := e.dial()
	io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n")
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		e.t.Fatalf("CONNECT %s: %v", authority, err)
	}
	status = strings.TrimSpace(status)
	// Skip the rest of the head, leave the body.
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return c, br, status
}

// echoServer accepts connections and echoes them.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echoLine writes s+"\n" and expects it back.
func echoLine(c net.Conn, br *bufio.Reader, s string) error {
	if _, err := io.WriteString(c, s+"\n"); err != nil {
		return err
	}
	got, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if got != s+"\n" {
		return errors.New("echo mismatch")
	}
	return nil
}

// testCA returns a CA pool and a server certificate for names.
func testCA(t *testing.T, names ...string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "egress test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// waitFor polls cond for up to 2 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
