//go:build linux

package netcfg

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
)

// The root tests build two network namespaces: "sandbox" (where the
// reconciler programs the rules and a uid-1000 process probes) and
// "internet" (10.99.0.2 and the IMDS address 169.254.169.254, with TCP and
// UDP echo servers on ports 7000/7001 and 53), linked by a veth pair. The
// test machine's own namespace is never changed.

const helperEnv = "NETCFG_TEST_HELPER"

// TestHelperProcess is the uid-1000 prober, run by re-executing the test
// binary in the sandbox namespace. Modes: "probe" tries each target of its
// arguments once; "hold" connects to one TCP target and does one
// write/read exchange per line on stdin.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	args := flagArgs()
	switch mode {
	case "probe":
		for _, a := range args {
			fmt.Println(probe(a))
		}
	case "hold":
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(0)
		}
		fmt.Println("CONNECTED")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println(exchange(c, 2*time.Second))
		}
	}
	os.Exit(0)
}

func flagArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// probe tries "tcp:host:port" or "udp:host:port": "OK <byte>" on an
// answer, "ERR ..." otherwise.
func probe(target string) string {
	network, addr, _ := strings.Cut(target, ":")
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	return exchange(c, time.Second)
}

func exchange(c net.Conn, timeout time.Duration) string {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("x")); err != nil {
		return "ERR " + err.Error()
	}
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil {
		return "ERR " + err.Error()
	}
	return "OK " + string(b)
}

// inNS runs f on an OS thread in ns. If the thread cannot be put back, it
// stays locked and dies with its goroutine.
func inNS(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("restore netns: %w", err)
			return // thread stays locked: discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// newNS creates a network namespace without entering it.
func newNS(t *testing.T) netns.NsHandle {
	t.Helper()
	var ns netns.NsHandle
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err = netns.New() // enters it
		if err != nil {
			errc <- err
			return
		}
		if err := netns.Set(orig); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

type testNet struct {
	sbx, inet netns.NsHandle
	bin       string // test binary uid 1000 can execute
}

func setupNet(t *testing.T) *testNet {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and nftables rules")
	}
	n := &testNet{sbx: newNS(t), inet: newNS(t)}
	hs, err := netlink.NewHandleAt(n.sbx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Close)
	hi, err := netlink.NewHandleAt(n.inet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hi.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	la := netlink.NewLinkAttrs()
	la.Name = "rt0"
	must(hs.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "rt1", PeerNamespace: netlink.NsFd(int(n.inet))}))
	up := func(h *netlink.Handle, name string, addrs ...string) netlink.Link {
		l, err := h.LinkByName(name)
		must(err)
		for _, a := range addrs {
			ad, err := netlink.ParseAddr(a)
			must(err)
			must(h.AddrAdd(l, ad))
		}
		must(h.LinkSetUp(l))
		return l
	}
	up(hs, "lo")
	rt0 := up(hs, "rt0", "10.99.0.1/24")
	up(hi, "lo")
	up(hi, "rt1", "10.99.0.2/24", "169.254.169.254/32")
	_, imds, _ := net.ParseCIDR("169.254.169.254/32")
	must(hs.RouteAdd(&netlink.Route{LinkIndex: rt0.Attrs().Index, Dst: imds, Scope: netlink.SCOPE_LINK}))

	// Servers in "the internet": TCP echo on 7000 and 53, UDP echo on 7001 and 53.
	must(inNS(n.inet, func() error {
		for _, port := range []string{"7000", "53"} {
			l, err := net.Listen("tcp4", "0.0.0.0:"+port)
			if err != nil {
				return err
			}
			t.Cleanup(func() { l.Close() })
			go serveTCP(l, 0)
			pc, err := net.ListenPacket("udp4", "0.0.0.0:"+map[string]string{"7000": "7001", "53": "53"}[port])
			if err != nil {
				return err
			}
			t.Cleanup(func() { pc.Close() })
			go serveUDP(pc, 0)
		}
		return nil
	}))

	// A copy of the test binary that uid 1000 can execute.
	dir, err := os.MkdirTemp("", "netcfg-test")
	must(err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(os.Chmod(dir, 0o755))
	n.bin = filepath.Join(dir, "netcfg.test")
	src, err := os.ReadFile(os.Args[0])
	must(err)
	must(os.WriteFile(n.bin, src, 0o755))
	return n
}

// serveTCP echoes, or answers every read with reply when it is not 0.
func serveTCP(l net.Listener, reply byte) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b := make([]byte, 1)
			for {
				if _, err := c.Read(b); err != nil {
					return
				}
				if reply != 0 {
					b[0] = reply
				}
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}()
	}
}

func serveUDP(pc net.PacketConn, reply byte) {
	b := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(b)
		if err != nil {
			return
		}
		if reply != 0 {
			b[0], n = reply, 1
		}
		_, _ = pc.WriteTo(b[:n], from)
	}
}

// uidCmd returns the helper command as uid 1000 (to be started in the
// sandbox namespace).
func (n *testNet) uidCmd(mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(n.bin, append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir = "/"
	return cmd
}

// asUID probes targets as uid 1000 in the sandbox namespace.
func (n *testNet) asUID(t *testing.T, targets ...string) []string {
	t.Helper()
	cmd := n.uidCmd("probe", targets...)
	var out []byte
	if err := inNS(n.sbx, func() error {
		var err error
		out, err = cmd.Output()
		return err
	}); err != nil {
		t.Fatalf("helper: %v (%s)", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// asRoot probes targets from this (root) process in the sandbox namespace.
func (n *testNet) asRoot(t *testing.T, targets ...string) []string {
	t.Helper()
	var out []string
	for _, tg := range targets {
		var s string
		if err := inNS(n.sbx, func() error { s = probe(tg); return nil }); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func (n *testNet) reconciler(t *testing.T, proxyPort, dnsPort uint16) (*Reconciler, *countingNFT) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(n.sbx)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(n.sbx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	cn := &countingNFT{NFT: c}
	r, err := New(Options{ProxyPort: proxyPort, DNSPort: dnsPort, NFT: cn, Rules: h,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(t.Context()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r, cn
}

type countingNFT struct {
	NFT
	flushes int
}

func (c *countingNFT) Flush() error { c.flushes++; return c.NFT.Flush() }

func wantResults(t *testing.T, who string, got []string, want ...bool) {
	t.Helper()
	for i, w := range want {
		if ok := i < len(got) && strings.HasPrefix(got[i], "OK"); ok != w {
			t.Errorf("%s probe %d: %q, want ok=%v", who, i, got, w)
		}
	}
}

func mustSet(t *testing.T, r *Reconciler, allow, deny []string) {
	t.Helper()
	p, err := netpolicy.Parse(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set(t.Context(), p); err != nil {
		t.Fatalf("Set(%q, %q): %v", allow, deny, err)
	}
}

const (
	tcpEcho = "tcp:10.99.0.2:7000"
	udpEcho = "udp:10.99.0.2:7001"
	tcpDNS  = "tcp:10.99.0.2:53"
	udpDNS  = "udp:10.99.0.2:53"
	tcpIMDS = "tcp:169.254.169.254:7000"
)

func TestRootPolicies(t *testing.T) {
	n := setupNet(t)
	r, cn := n.reconciler(t, 0, 0)

	// Without any policy uid 1000 gets through (sanity check of the setup).
	wantResults(t, "uid 1000, no table", n.asUID(t, tcpEcho, udpEcho, tcpIMDS), true, true, true)

	mustSet(t, r, nil, []string{"ALL_TRAFFIC"})
	wantResults(t, "uid 1000, deny-all", n.asUID(t, tcpEcho, udpEcho, tcpDNS, udpDNS), false, false, false, false)
	wantResults(t, "root, deny-all", n.asRoot(t, tcpEcho, udpEcho, udpDNS), true, true, true)
	if !r.IMDSBlocked() {
		t.Error("IMDSBlocked false")
	}

	mustSet(t, r, []string{"10.99.0.2/32"}, []string{"ALL_TRAFFIC"})
	wantResults(t, "uid 1000, allow 10.99.0.2", n.asUID(t, tcpEcho, udpEcho), true, true)

	// The same policy twice sends nothing.
	before := cn.flushes
	mustSet(t, r, []string{"10.99.0.2"}, []string{"ALL_TRAFFIC"})
	if cn.flushes != before {
		t.Errorf("same policy flushed %d times", cn.flushes-before)
	}
	if err := r.Verify(t.Context()); err != nil || cn.flushes != before {
		t.Errorf("Verify: %v, flushes %d", err, cn.flushes-before)
	}

	// IMDS stays closed with everything allowed.
	mustSet(t, r, []string{"ALL_TRAFFIC"}, nil)
	wantResults(t, "uid 1000, allow all", n.asUID(t, tcpIMDS, tcpEcho), false, true)
	wantResults(t, "root, allow all", n.asRoot(t, tcpIMDS), true)

	// The policy routing rules alone block IMDS: remove the table behind
	// the reconciler's back; Verify then puts it back.
	c, err := nftables.New(nftables.WithNetNSFd(int(n.sbx)))
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	got := n.asUID(t, tcpIMDS)
	wantResults(t, "uid 1000, ip rules only", got, false)
	if !strings.Contains(got[0], "permission denied") {
		t.Logf("IMDS via ip rule only: %q (want EACCES from prohibit)", got)
	}
	if err := r.Verify(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cn.flushes == before {
		t.Error("Verify did not reinstall the dropped table")
	}
	if _, err := c.ListTableOfFamily(TableName, nftables.TableFamilyINet); err != nil {
		t.Errorf("table not back: %v", err)
	}
	if err := r.Probe(t.Context()); err != nil {
		t.Errorf("Probe: %v", err)
	}
}

func TestRootLiveConnectionCut(t *testing.T) {
	n := setupNet(t)
	r, _ := n.reconciler(t, 0, 0)
	mustSet(t, r, []string{"10.99.0.2/32"}, []string{"ALL_TRAFFIC"})

	cmd := n.uidCmd("hold", strings.TrimPrefix(tcpEcho, "tcp:"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := inNS(n.sbx, cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("helper ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); l != "CONNECTED" {
		t.Fatalf("helper: %q", l)
	}
	fmt.Fprintln(stdin)
	if l := next(); !strings.HasPrefix(l, "OK") {
		t.Fatalf("exchange before swap: %q", l)
	}
	mustSet(t, r, nil, []string{"ALL_TRAFFIC"})
	fmt.Fprintln(stdin)
	if l := next(); !strings.HasPrefix(l, "ERR") {
		t.Errorf("exchange after swap to deny-all: %q, want an error", l)
	} else {
		t.Logf("live connection after swap: %s", l)
	}
}

func TestRootHostsRedirect(t *testing.T) {
	n := setupNet(t)
	// rayd's stand-ins: a "proxy" answering P and a "DNS forwarder"
	// answering D, on 127.0.0.1 in the sandbox namespace.
	var proxyPort, dnsPort uint16
	if err := inNS(n.sbx, func() error {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		go serveTCP(l, 'P')
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { pc.Close() })
		go serveUDP(pc, 'D')
		proxyPort = uint16(l.Addr().(*net.TCPAddr).Port)
		dnsPort = uint16(pc.LocalAddr().(*net.UDPAddr).Port)
		dl, err := net.Listen("tcp4", pc.LocalAddr().String()) // DNS over TCP, same port
		if err != nil {
			return err
		}
		t.Cleanup(func() { dl.Close() })
		go serveTCP(dl, 'D')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r, _ := n.reconciler(t, proxyPort, dnsPort)
	mustSet(t, r, []string{"api.example.com:7000"}, []string{"ALL_TRAFFIC"})
	got := n.asUID(t, tcpEcho, udpDNS, tcpDNS, udpEcho, tcpIMDS)
	want := []string{"OK P", "OK D", "OK D", "", ""}
	for i, w := range want {
		if w == "" {
			if strings.HasPrefix(got[i], "OK") {
				t.Errorf("probe %d: %q, want an error", i, got[i])
			}
		} else if got[i] != w {
			t.Errorf("probe %d: %q, want %q", i, got[i], w)
		}
	}
	wantResults(t, "root, hosts", n.asRoot(t, tcpEcho), true)
	if strings.HasSuffix(n.asRoot(t, tcpEcho)[0], "P") {
		t.Error("root was redirected")
	}
}

// A reconciler's first Set creates the table exclusively; on a namespace
// where the table exists already (a second reconciler here) the kernel
// refuses that, and the table is replaced: the policy holds all the same.
func TestRootFirstSetOverAnExistingTable(t *testing.T) {
	n := setupNet(t)
	r1, c1 := n.reconciler(t, 0, 0)
	mustSet(t, r1, []string{"ALL_TRAFFIC"}, nil)
	if c1.flushes != 1 {
		t.Errorf("fresh namespace: %d transactions, want 1", c1.flushes)
	}
	wantResults(t, "uid 1000, allow all", n.asUID(t, tcpEcho), true)

	r2, c2 := n.reconciler(t, 0, 0)
	mustSet(t, r2, nil, []string{"ALL_TRAFFIC"})
	if c2.flushes != 2 {
		t.Errorf("existing table: %d transactions, want 2", c2.flushes)
	}
	wantResults(t, "uid 1000, deny-all over the old table", n.asUID(t, tcpEcho, udpEcho), false, false)
	if !r2.IMDSBlocked() {
		t.Error("IMDSBlocked false")
	}
}
