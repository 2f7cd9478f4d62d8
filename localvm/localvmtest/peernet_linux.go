// Package localvmtest helps tests and benchmarks of the local platform: a
// peer network namespace that plays "the internet" for sandboxes, so that
// their traffic meets real servers without any other address being
// contacted. It needs root. It is not for production use.
package localvmtest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/dns/dnsmessage"
)

// PeerNet is a network namespace joined to the caller's by a veth pair:
// Host is the caller's side, Addrs are the peer's addresses (the first is
// its main one). Sandboxes with Internet access reach Addrs through the
// local platform's NAT; nothing leaves the machine.
type PeerNet struct {
	Host  netip.Addr
	Addrs []netip.Addr

	ns      netns.NsHandle
	hostIf  string
	mu      sync.Mutex
	closers []func()
}

// NewPeerNet creates the namespace and its veth pair in prefix (a /24
// such as 10.250.9.0/24: the caller's side .1, the peer's .2 and then one
// more address per extra).
func NewPeerNet(prefix netip.Prefix, extra int) (_ *PeerNet, err error) {
	if !prefix.Addr().Is4() || prefix.Bits() > 29 || extra < 0 || extra > 8 {
		return nil, errors.New("localvmtest: an IPv4 prefix of /29 or wider, at most 8 extra addresses")
	}
	base := prefix.Masked().Addr()
	p := &PeerNet{Host: base.Next()}
	a := p.Host
	for i := 0; i <= extra; i++ {
		a = a.Next()
		p.Addrs = append(p.Addrs, a)
	}
	suffix := fmt.Sprintf("%04x", time.Now().UnixNano()&0xffff)
	p.hostIf = "rtp" + suffix + "h"
	peerIf := "rtp" + suffix + "p"

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.hostIf}, PeerName: peerIf}); err != nil {
		return nil, err
	}
	ns, err := netns.New() // this thread is in it now
	if err != nil {
		_ = netns.Set(orig)
		return nil, err
	}
	p.ns = ns
	if err := netns.Set(orig); err != nil {
		return nil, err
	}
	peer, err := netlink.LinkByName(peerIf)
	if err != nil {
		return nil, err
	}
	if err := netlink.LinkSetNsFd(peer, int(ns)); err != nil {
		return nil, err
	}
	host, err := netlink.LinkByName(p.hostIf)
	if err != nil {
		return nil, err
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(p.Host, prefix.Bits())}); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, err
	}
	return p, p.inside(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		l, err := netlink.LinkByName(peerIf)
		if err != nil {
			return err
		}
		for _, a := range p.Addrs {
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(a, prefix.Bits())}); err != nil {
				return err
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{Gw: p.Host.AsSlice()})
	})
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}
}

// Do runs f on an OS thread inside the peer namespace: a process f
// starts (exec.Cmd.Start) is born in it.
func (p *PeerNet) Do(f func() error) error { return p.inside(f) }

// Addr is the peer's main address.
func (p *PeerNet) Addr() netip.Addr { return p.Addrs[0] }

// inside runs f on a thread in the peer namespace.
func (p *PeerNet) inside(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(p.ns); err != nil {
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		// The thread stays locked (and is discarded with it).
		return errors.Join(ferr, err)
	}
	return ferr
}

// Listen opens a listener inside the peer namespace (it is closed with
// the PeerNet).
func (p *PeerNet) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := p.inside(func() (err error) {
		ln, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.onClose(func() { _ = ln.Close() })
	return ln, nil
}

// ListenPacket opens a packet listener inside the peer namespace.
func (p *PeerNet) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := p.inside(func() (err error) {
		pc, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.onClose(func() { _ = pc.Close() })
	return pc, nil
}

func (p *PeerNet) onClose(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closers = append(p.closers, f)
}

// ServeDNS answers A queries for names (fully qualified, lower case,
// e.g. "example.test.") on pc until it closes; every other name is
// NXDOMAIN.
func ServeDNS(pc net.PacketConn, names map[string]netip.Addr) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var parser dnsmessage.Parser
		h, err := parser.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := parser.Question()
		if err != nil {
			continue
		}
		addr, ok := names[strings.ToLower(q.Name.String())]
		hdr := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true}
		if !ok {
			hdr.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, hdr)
		_ = b.StartQuestions()
		_ = b.Question(q)
		if ok && q.Type == dnsmessage.TypeA && addr.Is4() {
			_ = b.StartAnswers()
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: addr.As4()})
		}
		if out, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// Close closes the listeners, the namespace and the veth pair.
func (p *PeerNet) Close() {
	p.mu.Lock()
	closers := p.closers
	p.closers = nil
	p.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	if l, err := netlink.LinkByName(p.hostIf); err == nil {
		_ = netlink.LinkDel(l)
	}
	if p.ns.IsOpen() {
		_ = p.ns.Close()
	}
}
