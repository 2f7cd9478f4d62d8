package egress

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func dnsQuery(t testing.TB, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	m, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dnsAnswer answers a query with one A record 203.0.113.10.
func dnsAnswer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qq, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
	b.StartQuestions()
	b.Question(qq)
	b.StartAnswers()
	b.AResource(dnsmessage.ResourceHeader{Name: qq.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte{203, 0, 113, 10}})
	m, _ := b.Finish()
	return m
}

// udpUpstream is a loopback DNS server counting the queries it gets.
func udpUpstream(t *testing.T, n *atomic.Int32) netip.AddrPort {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			n.Add(1)
			pc.WriteTo(dnsAnswer(buf[:k]), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

func tcpUpstream(t *testing.T, n *atomic.Int32) netip.AddrPort {
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
				q, err := readTCPMessage(c)
				if err != nil {
					return
				}
				n.Add(1)
				writeTCPMessage(c, dnsAnswer(q))
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func startDNS(t *testing.T, ups ...netip.AddrPort) (*DNS, net.PacketConn, net.Listener) {
	d := NewDNS(DNSOptions{Upstreams: ups, Timeout: time.Second})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go d.ServeUDP(pc)
	go d.ServeTCP(ln)
	t.Cleanup(func() { d.Close() })
	return d, pc, ln
}

func udpExchange(t *testing.T, server net.Addr, q []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", server.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(q)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func rcodeOf(t *testing.T, m []byte, id uint16) dnsmessage.RCode {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(m)
	if err != nil || !h.Response || h.ID != id {
		t.Fatalf("bad answer %x: %v %+v", m, err, h)
	}
	return h.RCode
}

func TestDNSUDP(t *testing.T) {
	var n atomic.Int32
	up := udpUpstream(t, &n)
	d, pc, _ := startDNS(t, up)
	d.SetPolicy(allowList{"allowed.test:443": true})

	resp := udpExchange(t, pc.LocalAddr(), dnsQuery(t, 1, "Allowed.Test.", dnsmessage.TypeA))
	if rc := rcodeOf(t, resp, 1); rc != dnsmessage.RCodeSuccess {
		t.Fatalf("allowed: rcode %v", rc)
	}
	var p dnsmessage.Parser
	p.Start(resp)
	p.SkipAllQuestions()
	if a, err := p.AllAnswers(); err != nil || len(a) != 1 {
		t.Errorf("answers %v %v", a, err)
	}
	if n.Load() != 1 {
		t.Fatalf("upstream got %d queries", n.Load())
	}

	resp = udpExchange(t, pc.LocalAddr(), dnsQuery(t, 2, "denied.test.", dnsmessage.TypeAAAA))
	if rc := rcodeOf(t, resp, 2); rc != dnsmessage.RCodeRefused {
		t.Fatalf("denied: rcode %v", rc)
	}
	p.Start(resp)
	if q, err := p.AllQuestions(); err != nil || len(q) != 1 || q[0].Name.String() != "denied.test." {
		t.Errorf("question not echoed: %v %v", q, err)
	}
	// A label holding a dot, a non-IN class, two questions, garbage.
	weird := dnsQuery(t, 3, "allowed.test.", dnsmessage.TypeA)
	weird = append(append(append([]byte{}, weird[:12]...), 12), []byte("allowed.test\x00\x00\x01\x00\x01")...)
	if rc := rcodeOf(t, udpExchange(t, pc.LocalAddr(), weird), 3); rc != dnsmessage.RCodeRefused {
		t.Errorf("dotted label: rcode %v", rc)
	}
	chaos := dnsQuery(t, 4, "allowed.test.", dnsmessage.TypeA)
	binary.BigEndian.PutUint16(chaos[len(chaos)-2:], 3)
	if rc := rcodeOf(t, udpExchange(t, pc.LocalAddr(), chaos), 4); rc != dnsmessage.RCodeRefused {
		t.Errorf("class CH: rcode %v", rc)
	}
	garbage := []byte{0, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0xff}
	if resp := udpExchange(t, pc.LocalAddr(), garbage); resp != nil && rcodeOf(t, resp, 5) != dnsmessage.RCodeRefused {
		t.Errorf("garbage: %x", resp)
	}
	if n.Load() != 1 {
		t.Errorf("upstream contacted for refused queries: %d", n.Load())
	}
	// No policy: refused.
	d.SetPolicy(nil)
	if rc := rcodeOf(t, udpExchange(t, pc.LocalAddr(), dnsQuery(t, 6, "allowed.test.", dnsmessage.TypeA)), 6); rc != dnsmessage.RCodeRefused {
		t.Errorf("nil policy: rcode %v", rc)
	}
	if s := d.Stats(); s.Forwarded != 1 || s.Refused < 4 {
		t.Errorf("stats %+v", s)
	}
}

type namePolicy struct{ allowList }

func (namePolicy) AllowsName(name string) bool { return name == "only.test" }

func TestDNSNamePolicyAndTCP(t *testing.T) {
	var n atomic.Int32
	up := tcpUpstream(t, &n)
	d, _, ln := startDNS(t, up)
	d.SetPolicy(namePolicy{allowList{"allowed.test:443": true}})

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	// Two queries on one connection.
	writeTCPMessage(c, dnsQuery(t, 7, "only.test.", dnsmessage.TypeA))
	resp, err := readTCPMessage(c)
	if err != nil || rcodeOf(t, resp, 7) != dnsmessage.RCodeSuccess {
		t.Fatalf("TCP allowed: %x %v", resp, err)
	}
	writeTCPMessage(c, dnsQuery(t, 8, "allowed.test.", dnsmessage.TypeA))
	resp, err = readTCPMessage(c)
	if err != nil || rcodeOf(t, resp, 8) != dnsmessage.RCodeRefused {
		t.Fatalf("TCP denied by NamePolicy: %x %v", resp, err)
	}
	if n.Load() != 1 {
		t.Errorf("upstream got %d queries", n.Load())
	}
	// A malformed frame closes the connection.
	c.Write([]byte{0, 3, 1, 2, 3})
	var ne net.Error
	if _, err := io.ReadAll(c); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("connection not closed: %v", err)
	}
}

func TestDNSSkipsItselfAsUpstream(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	d := NewDNS(DNSOptions{Upstreams: []netip.AddrPort{self}, Timeout: time.Second})
	d.SetPolicy(allowList{"allowed.test:443": true})
	go d.ServeUDP(pc)
	defer d.Close()
	resp := udpExchange(t, pc.LocalAddr(), dnsQuery(t, 9, "allowed.test.", dnsmessage.TypeA))
	if rc := rcodeOf(t, resp, 9); rc != dnsmessage.RCodeServerFailure {
		t.Fatalf("rcode %v", rc)
	}
	if s := d.Stats(); s.Failed != 1 || s.Forwarded != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestResolvConf(t *testing.T) {
	path := t.TempDir() + "/resolv.conf"
	writeFile(t, path, "# c\nnameserver 10.0.0.2\nnameserver ::1\nnameserver bogus\nsearch x\n")
	got := resolvConfServers(path)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.2:53"), netip.MustParseAddrPort("[::1]:53")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v", got)
	}
}
