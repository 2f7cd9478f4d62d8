package peercred

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "PEERCRED_TEST_HELPER_DIAL"

// TestHelperProcess is not a test: it is the client that the root-only tests
// start as another user. It dials the address in $PEERCRED_TEST_HELPER_DIAL,
// prints its local address and holds the connection until stdin closes.
func TestHelperProcess(t *testing.T) {
	addr := os.Getenv(helperEnv)
	if addr == "" {
		t.Skip("helper process for TestLookupTCPOtherUser")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	fmt.Println(c.LocalAddr())
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	os.Exit(0)
}

// socketInode returns the inode of c's socket as the kernel names it in
// /proc/self/fd.
func socketInode(t *testing.T, c net.Conn) uint64 {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	var lerr error
	if err := rc.Control(func(fd uintptr) { link, lerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) }); err != nil {
		t.Fatal(err)
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
	if err != nil {
		t.Fatalf("fd link %q: %v", link, err)
	}
	return n
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		if strings.Contains(addr, "::") {
			t.Skipf("no IPv6: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair dials ln and returns the client end and the accepted server end.
func pair(t *testing.T, ln net.Listener, network, addr string) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

func TestLookupTCPSelf(t *testing.T) {
	for _, tc := range []struct {
		name           string
		listenNet      string
		listenAddr     string
		dialNet        string
		dialHost       string
		wantMappedSide bool // the accepted conn reports an IPv4 address of an AF_INET6 socket
	}{
		{"ipv4", "tcp4", "127.0.0.1:0", "tcp4", "127.0.0.1", false},
		{"ipv6", "tcp6", "[::1]:0", "tcp6", "::1", false},
		{"ipv4 client to dual-stack listener", "tcp", "[::]:0", "tcp4", "127.0.0.1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, tc.listenNet, tc.listenAddr)
			client, server := pair(t, ln, tc.dialNet, net.JoinHostPort(tc.dialHost, strconv.Itoa(port(ln))))
			if tc.wantMappedSide {
				// Go reports ::ffff:127.0.0.1 in its 16-byte form; the
				// lookup must still find the client's row in tcp.
				if a := server.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); !a.Is4In6() {
					t.Logf("note: accepted local address %v is not in mapped form", a)
				}
			}
			o, err := LookupTCP(server.LocalAddr(), server.RemoteAddr())
			if err != nil {
				t.Fatalf("LookupTCP: %v", err)
			}
			if o.UID != uint32(os.Getuid()) {
				t.Errorf("UID = %d, want %d", o.UID, os.Getuid())
			}
			if want := socketInode(t, client); o.Inode != want {
				t.Errorf("Inode = %d, want the client socket's %d", o.Inode, want)
			}
			if o.State != StateEstablished {
				t.Errorf("State = %#x, want established", o.State)
			}
			// The server end is not the client end: swapping the
			// addresses finds the accepted socket instead.
			so, err := LookupTCP(server.RemoteAddr(), server.LocalAddr())
			if err != nil || so.Inode != socketInode(t, server) {
				t.Errorf("reverse lookup = %+v, %v; want the server socket %d", so, err, socketInode(t, server))
			}
		})
	}
}

// TestLookupTCPMappedClient covers an IPv6 client socket that talks to an
// IPv4 peer through an IPv4-mapped address: its row is in tcp6 with
// ::ffff:127.0.0.1 while the server sees plain 127.0.0.1.
func TestLookupTCPMappedClient(t *testing.T) {
	ln := listen(t, "tcp4", "127.0.0.1:0")
	fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no IPv6 sockets: %v", err)
	}
	sa := &syscall.SockaddrInet6{Port: port(ln), Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		t.Skipf("connect to v4-mapped address: %v", err)
	}
	f := os.NewFile(uintptr(fd), "v6-client")
	client, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	o, err := LookupTCP(server.LocalAddr(), server.RemoteAddr())
	if err != nil {
		t.Fatalf("LookupTCP: %v", err)
	}
	if o.UID != uint32(os.Getuid()) || o.Inode != socketInode(t, client) {
		t.Errorf("got %+v, want uid %d inode %d", o, os.Getuid(), socketInode(t, client))
	}
}

func TestLookupTCPNotFound(t *testing.T) {
	ln := listen(t, "tcp4", "127.0.0.1:0")
	// Nothing in this namespace is 192.0.2.1:1 (TEST-NET-1).
	_, err := LookupTCP(ln.Addr(), &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1})
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrOwnerGone) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	_, err = LookupTCP(&net.TCPAddr{IP: net.IPv6loopback, Port: 1}, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 2})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("IPv6: got %v, want ErrNotFound", err)
	}
	if _, err := LookupTCP(nil, ln.Addr()); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("nil local: got %v, want a plain error", err)
	}
}

// findRow returns the row of the client end of server's connection,
// whatever its state.
func findRow(t *testing.T, server net.Conn) (Row, bool) {
	t.Helper()
	l, _ := addrPort(server.LocalAddr())
	r, _ := addrPort(server.RemoteAddr())
	var got Row
	found := false
	for _, p := range []string{tcp4Table, tcp6Table} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		err = ParseTable(f, func(row Row) bool {
			if canonical(row.LocalIP) == r && canonical(row.RemoteIP) == l {
				got, found = row, true
				return false
			}
			return true
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if found {
			break
		}
	}
	return got, found
}

// TestLookupTCPClosedClient checks that a client that closed first, whose
// socket is first orphaned (FIN_WAIT2, inode 0) and then in TIME_WAIT
// (printed with uid 0), is reported as ErrOwnerGone and never as uid 0.
func TestLookupTCPClosedClient(t *testing.T) {
	for _, tc := range []struct{ name, listenNet, listenAddr, dialNet, host string }{
		{"ipv4", "tcp4", "127.0.0.1:0", "tcp4", "127.0.0.1"},
		{"ipv6", "tcp6", "[::1]:0", "tcp6", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, tc.listenNet, tc.listenAddr)
			client, server := pair(t, ln, tc.dialNet, net.JoinHostPort(tc.host, strconv.Itoa(port(ln))))
			if _, err := LookupTCP(server.LocalAddr(), server.RemoteAddr()); err != nil {
				t.Fatalf("before close: %v", err)
			}
			client.Close()
			// The server has not closed yet: the client socket is an orphan.
			waitState(t, server, func(r Row) bool { return r.Inode == 0 })
			o, err := LookupTCP(server.LocalAddr(), server.RemoteAddr())
			if !errors.Is(err, ErrOwnerGone) {
				t.Fatalf("orphaned client: got %+v, %v; want ErrOwnerGone", o, err)
			}
			server.Close()
			row := waitState(t, server, func(r Row) bool { return r.State == StateTimeWait })
			if row.UID != 0 || row.Inode != 0 {
				t.Logf("note: TIME_WAIT row has uid %d inode %d", row.UID, row.Inode)
			}
			o, err = LookupTCP(server.LocalAddr(), server.RemoteAddr())
			if !errors.Is(err, ErrOwnerGone) || errors.Is(err, ErrNotFound) {
				t.Fatalf("TIME_WAIT client: got %+v, %v; want ErrOwnerGone", o, err)
			}
		})
	}
}

func waitState(t *testing.T, server net.Conn, ok func(Row) bool) Row {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		row, found := findRow(t, server)
		if found && ok(row) {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("client row never reached the expected state; last %+v (found %v)", row, found)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// helperBinary copies the test binary to a directory that other users can
// traverse: go test builds it under a 0700 directory.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "peercred-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "peercred.test")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestLookupTCPOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the client must run as uid 1000")
	}
	bin := helperBinary(t)
	for _, tc := range []struct{ name, listenNet, listenAddr, dialHost string }{
		{"ipv4", "tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"ipv6", "tcp6", "[::1]:0", "::1"},
		{"ipv4 client to dual-stack listener", "tcp", "[::]:0", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, tc.listenNet, tc.listenAddr)
			cmd := exec.Command(bin, "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), helperEnv+"="+net.JoinHostPort(tc.dialHost, strconv.Itoa(port(ln))))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				if err := cmd.Wait(); err != nil {
					t.Errorf("helper: %v", err)
				}
			}()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("helper output: %v", err)
			}
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			if got := strings.TrimSpace(line); got != server.RemoteAddr().String() {
				t.Fatalf("accepted %v, helper is %s", server.RemoteAddr(), got)
			}
			o, err := LookupTCP(server.LocalAddr(), server.RemoteAddr())
			if err != nil {
				t.Fatalf("LookupTCP: %v", err)
			}
			if o.UID != 1000 {
				t.Errorf("UID = %d, want 1000", o.UID)
			}
		})
	}
}

// TestDiagAgreesWithTables checks that the sock_diag lookup and the table
// fallback give the same answer, for live, reversed and unknown sockets.
func TestDiagAgreesWithTables(t *testing.T) {
	for _, tc := range []struct{ name, listenNet, listenAddr, dialNet, host string }{
		{"ipv4", "tcp4", "127.0.0.1:0", "tcp4", "127.0.0.1"},
		{"ipv6", "tcp6", "[::1]:0", "tcp6", "::1"},
		{"ipv4 client to dual-stack listener", "tcp", "[::]:0", "tcp4", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, tc.listenNet, tc.listenAddr)
			client, server := pair(t, ln, tc.dialNet, net.JoinHostPort(tc.host, strconv.Itoa(port(ln))))
			l, _ := addrPort(server.LocalAddr())
			r, _ := addrPort(server.RemoteAddr())
			for _, q := range []struct {
				name string
				l, r netip.AddrPort
				want uint64
			}{
				{"client end", l, r, socketInode(t, client)},
				{"server end", r, l, socketInode(t, server)},
			} {
				d, derr := lookupDiag(q.l, q.r)
				tb, terr := lookupTables(q.l, q.r)
				if derr != nil || terr != nil || d != tb || d.Inode != q.want {
					t.Errorf("%s: diag %+v, %v; tables %+v, %v; want inode %d", q.name, d, derr, tb, terr, q.want)
				}
			}
			unknown := netip.MustParseAddrPort("192.0.2.1:1")
			if l.Addr().Is6() {
				unknown = netip.MustParseAddrPort("[2001:db8::1]:1")
			}
			if _, err := lookupDiag(l, unknown); !errors.Is(err, ErrNotFound) {
				t.Errorf("diag of an unknown client = %v, want ErrNotFound", err)
			}
		})
	}
}
