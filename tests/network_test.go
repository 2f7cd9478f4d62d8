package tests

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// The peer network namespace that plays "the internet" for the network
// tests: a veth pair from the test's namespace, its side peerHost, the
// other side peerAddr (and a second address, peerOther) inside it. All
// test traffic stays there: no other address is ever contacted.
var (
	peerHost  = netip.MustParseAddr("10.250.9.1")
	peerAddr  = netip.MustParseAddr("10.250.9.2")
	peerOther = netip.MustParseAddr("10.250.9.3")
)

// peerNames is what the peer's DNS server answers (every other name:
// NXDOMAIN).
var peerNames = map[string]netip.Addr{
	"allowed.test.":      peerAddr,
	"api.sub.test.":      peerAddr,
	"denied.test.":       peerAddr,
	"loop.sub.test.":     netip.MustParseAddr("127.0.0.1"),
	"metadata.sub.test.": netip.MustParseAddr("169.254.169.254"),
}

// peerNet is the running peer namespace and its test CA.
type peerNet struct {
	caPEM []byte
	close func()
}

// startPeerNet creates the peer namespace (localvmtest.PeerNet) and its
// servers: HTTP on :80 (answers "hello <Host>"), HTTPS on :443 (a
// certificate for the test names from a test CA) and TCP echo on :7 on
// both addresses, DNS on peerAddr:53 (peerNames).
func startPeerNet(t *testing.T) *peerNet {
	t.Helper()
	_, caPEM, leaf := testPKI(t, "allowed.test", "api.sub.test", "denied.test")
	pn, err := localvmtest.NewPeerNet(netip.PrefixFrom(peerHost, 24).Masked(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if pn.Host != peerHost || pn.Addrs[0] != peerAddr || pn.Addrs[1] != peerOther {
		pn.Close()
		t.Fatalf("peer addresses %v %v", pn.Host, pn.Addrs)
	}
	listen := func(a netip.Addr, port uint16) net.Listener {
		ln, err := pn.Listen("tcp", netip.AddrPortFrom(a, port).String())
		if err != nil {
			pn.Close()
			t.Fatal(err)
		}
		return ln
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) })
	for _, a := range pn.Addrs {
		web, tlsLn, echo := listen(a, 80), listen(a, 443), listen(a, 7)
		go func() { _ = http.Serve(web, h) }()
		go func() { _ = http.Serve(tls.NewListener(tlsLn, &tls.Config{Certificates: []tls.Certificate{leaf}}), h) }()
		go serveEcho(echo)
	}
	dns, err := pn.ListenPacket("udp", netip.AddrPortFrom(peerAddr, 53).String())
	if err != nil {
		pn.Close()
		t.Fatal(err)
	}
	go localvmtest.ServeDNS(dns, peerNames)
	return &peerNet{caPEM: caPEM, close: pn.Close}
}

func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// testPKI makes a CA and a leaf certificate for names.
func testPKI(t *testing.T, names ...string) (*x509.Certificate, []byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rayito test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		DNSNames:  names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// sh runs a shell command in sbx as its user and returns its stdout and
// whether it exited 0.
func sh(ctx context.Context, t *testing.T, sbx *rayito.Sandbox, cmd string) (string, bool) {
	t.Helper()
	res, err := sbx.Commands.Run(ctx, cmd)
	var ee *rayito.CommandExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", cmd, err)
	}
	if res == nil {
		return "", false
	}
	return res.Stdout, err == nil && res.ExitCode == 0
}

// TestNetworkPolicy: real traffic from sandboxes of the local platform to
// the peer namespace, as root. A deny-all sandbox reaches nothing and
// resolves nothing; one allowed a CIDR reaches that address only; one
// allowed hosts reaches them by name (through the proxy variables and,
// without them, transparently), is refused other names, names that
// resolve to loopback or the metadata address, and other addresses; a
// policy swap cuts a live connection; the metadata address is never
// reachable.
func TestNetworkPolicy(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: network namespaces and the root platform")
	}
	pn := startPeerNet(t)
	defer pn.close()
	p := startPlatform(t, "", func(o *localvm.Options) { o.DNS = []netip.Addr{peerAddr} })
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	create := func(opts ...rayito.Option) *rayito.Sandbox {
		t.Helper()
		sbx, err := rayito.Create(ctx, p.opts(opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sbx.Kill(context.Background()) })
		return sbx
	}
	curl := "curl -fsS -m 5 " // -f: an HTTP error (the proxy's 403) is a failure
	web := "http://" + peerAddr.String() + "/"

	t.Run("open", func(t *testing.T) {
		sbx := create()
		if out, ok := sh(ctx, t, sbx, curl+web); !ok || out != "hello "+peerAddr.String() {
			t.Fatalf("an open sandbox: %q %v", out, ok)
		}
		if out, ok := sh(ctx, t, sbx, "getent hosts allowed.test"); !ok || !strings.Contains(out, peerAddr.String()) {
			t.Fatalf("an open sandbox resolves: %q %v", out, ok)
		}
		st, err := sbx.Network(ctx)
		if err != nil || st.Enforcement != "guest_routes_and_proxy" || len(st.AllowOut)+len(st.DenyOut) != 0 {
			t.Fatalf("open policy: %+v %v", st, err)
		}
	})

	t.Run("deny-all", func(t *testing.T) {
		sbx := create(rayito.WithNetwork(rayito.DenyAllNetwork()))
		start := time.Now()
		if out, ok := sh(ctx, t, sbx, curl+web); ok {
			t.Fatalf("deny-all reached the peer: %q", out)
		}
		t.Logf("a denied connection failed in %v (curl included)", time.Since(start))
		if out, ok := sh(ctx, t, sbx, "getent hosts allowed.test"); ok {
			t.Fatalf("deny-all resolved a name: %q", out)
		}
		if out, ok := sh(ctx, t, sbx, "exec 3<>/dev/udp/"+peerAddr.String()+"/53 && echo x >&3"); ok && out != "" {
			t.Fatalf("deny-all sent UDP: %q", out)
		}
		// rayd itself still works: this very command ran.
	})

	t.Run("cidr", func(t *testing.T) {
		sbx := create(rayito.WithNetwork(rayito.NetworkPolicy{AllowOut: []string{peerAddr.String() + "/32"}, DenyOut: rayito.DenyAllNetwork().DenyOut}))
		if out, ok := sh(ctx, t, sbx, curl+web); !ok || out != "hello "+peerAddr.String() {
			t.Fatalf("allowed CIDR: %q %v", out, ok)
		}
		if out, ok := sh(ctx, t, sbx, curl+"http://"+peerOther.String()+"/"); ok {
			t.Fatalf("an address outside the CIDR: %q", out)
		}
		// A live connection, then a swap to deny-all: it is cut.
		script := "import socket,time\ns=socket.create_connection(('" + peerAddr.String() + "',7),timeout=3)\n" +
			"for i in range(40):\n    try:\n        s.sendall(b'x'); s.recv(1); print('ok', flush=True)\n    except Exception as e:\n        print('cut', flush=True); break\n    time.sleep(0.1)\n"
		var mu sync.Mutex
		var lines []string
		h, err := sbx.Commands.Start(ctx, "python3 -c \""+script+"\"", rayito.OnStdout(func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(lines)
			mu.Unlock()
			if n >= 3 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := sbx.UpdateNetwork(ctx, rayito.DenyAllNetwork()); err != nil {
			t.Fatal(err)
		}
		_, _ = h.Wait(ctx)
		mu.Lock()
		got := strings.Join(lines, " ")
		mu.Unlock()
		if !strings.HasPrefix(got, "ok ok ok") || !strings.HasSuffix(got, "cut") {
			t.Fatalf("live connection across the swap: %q", got)
		}
		st, err := sbx.Network(ctx)
		if err != nil || len(st.AllowOut) != 0 || len(st.DenyOut) == 0 {
			t.Fatalf("after the swap: %+v %v", st, err)
		}
	})

	t.Run("hosts", func(t *testing.T) {
		sbx := create(rayito.WithNetwork(rayito.NetworkPolicy{AllowOut: []string{"allowed.test", "*.sub.test"}, DenyOut: rayito.DenyAllNetwork().DenyOut}))
		if _, err := sbx.Files.Write(ctx, "/tmp/ca.pem", pn.caPEM); err != nil {
			t.Fatal(err)
		}
		tlsCurl := curl + "--cacert /tmp/ca.pem "
		cases := []struct {
			name, cmd, want string
		}{
			{"https through HTTPS_PROXY", tlsCurl + "https://allowed.test/", "hello allowed.test"},
			{"http through HTTP_PROXY, absolute form", curl + "http://api.sub.test/", "hello api.sub.test"},
			{"https, transparent", tlsCurl + "--noproxy '*' https://allowed.test/", "hello allowed.test"},
			{"http, transparent", curl + "--noproxy '*' http://api.sub.test/", "hello api.sub.test"},
			{"socks5", tlsCurl + "--noproxy '' -x socks5h://127.0.0.1:9180 https://api.sub.test/", "hello api.sub.test"},
		}
		for _, c := range cases {
			if out, ok := sh(ctx, t, sbx, c.cmd); !ok || out != c.want {
				t.Errorf("%s: %q %v", c.name, out, ok)
			}
		}
		refused := []struct{ name, cmd string }{
			{"a name not allowed, proxy", tlsCurl + "https://denied.test/"},
			{"a name not allowed, transparent", tlsCurl + "--noproxy '*' --resolve denied.test:443:" + peerAddr.String() + " https://denied.test/"},
			{"an allowed name resolving to loopback", curl + "http://loop.sub.test/"},
			{"an allowed name resolving to the metadata address", curl + "http://metadata.sub.test/"},
			{"CONNECT to loopback by name", curl + "-p -x http://127.0.0.1:9180 http://loop.sub.test/"},
			{"an address not allowed", curl + "--noproxy '*' http://" + peerOther.String() + "/"},
			{"the metadata address", curl + "--noproxy '*' http://169.254.169.254/"},
			{"a name not allowed resolves", "getent hosts denied.test"},
		}
		for _, c := range refused {
			if out, ok := sh(ctx, t, sbx, c.cmd); ok {
				t.Errorf("%s: got through: %q", c.name, out)
			}
		}
		if out, ok := sh(ctx, t, sbx, "getent hosts allowed.test"); !ok || !strings.Contains(out, peerAddr.String()) {
			t.Errorf("an allowed name does not resolve: %q %v", out, ok)
		}
		if out, _ := sh(ctx, t, sbx, "echo $HTTPS_PROXY"); strings.TrimSpace(out) != "http://127.0.0.1:9180" {
			t.Errorf("HTTPS_PROXY = %q", out)
		}
	})

	t.Run("bad policy", func(t *testing.T) {
		running := func() int {
			t.Helper()
			vms, err := rayito.List(ctx, p.opts()...)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, vm := range vms {
				if vm.State == "RUNNING" || vm.State == "PENDING" {
					n++
				}
			}
			return n
		}
		before := running()
		// Refused by the SDK before anything starts, and by rayd (a name
		// of one label) after the start: then the sandbox is killed.
		for _, entry := range []string{"not a host!", "nothost"} {
			sbx, err := rayito.Create(ctx, p.opts(rayito.WithNetwork(rayito.NetworkPolicy{AllowOut: []string{entry}}))...)
			if !errors.Is(err, rayito.ErrInvalidArgument) || sbx != nil {
				t.Fatalf("%q: %v", entry, err)
			}
		}
		if after := running(); after != before {
			t.Fatalf("%d sandboxes running after the refused creates, %d before", after, before)
		}
	})
}
