package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DumpAttempts bounds RetryDump, and any other retry of a netlink dump the
// kernel interrupted.
const DumpAttempts = 5

// RetryDump repeats a netlink dump the kernel interrupted because the
// table changed meanwhile (NLM_F_DUMP_INTR: other sandboxes starting or
// stopping), whose answer may be incomplete.
func RetryDump[T any](dump func() (T, error)) (T, error) {
	var (
		out T
		err error
	)
	for range DumpAttempts {
		if out, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return out, err
}

// Netlink is the part of *netlink.Handle that Veths uses, in the host's
// network namespace or in a sandbox's.
type Netlink interface {
	LinkAdd(netlink.Link) error
	LinkByName(string) (netlink.Link, error)
	LinkSetUp(netlink.Link) error
	LinkDel(netlink.Link) error
	LinkList() ([]netlink.Link, error)
	AddrAdd(netlink.Link, *netlink.Addr) error
	AddrList(netlink.Link, int) ([]netlink.Addr, error)
	RouteAdd(*netlink.Route) error
}

var _ Netlink = (*netlink.Handle)(nil)

// Veths makes and removes the sandboxes' veth pairs and lists the host's
// addresses.
type Veths struct {
	host Netlink // the host's network namespace
	// openNS opens the network namespace of pid; closeNS closes what it
	// returned.
	openNS  func(pid int) (nsfd int, err error)
	closeNS func(nsfd int)
	// inNS returns a handle in the namespace nsfd, and its Close.
	inNS func(nsfd int) (Netlink, func(), error)
}

// NewVeths returns Veths on the kernel's netlink: the package's default
// handle (the calling thread's namespace, the host's) and handles opened
// in the sandboxes' namespaces.
func NewVeths() *Veths {
	return &Veths{
		host: &netlink.Handle{}, // what the package functions use
		openNS: func(pid int) (int, error) {
			return unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		},
		closeNS: func(nsfd int) { _ = unix.Close(nsfd) },
		inNS: func(nsfd int) (Netlink, func(), error) {
			h, err := netlink.NewHandleAt(netns.NsHandle(nsfd), unix.NETLINK_ROUTE)
			if err != nil {
				return nil, nil, err
			}
			return h, h.Close, nil
		},
	}
}

// HostAddrs returns every IPv4 address assigned to an interface of the
// host's network namespace.
func (hn *Veths) HostAddrs() ([]netip.Addr, error) {
	addrs, err := RetryDump(func() ([]netlink.Addr, error) { return hn.host.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("launcher: listing addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

// Setup creates the sandbox's veth pair: the host side (veth) gets
// host/30 and comes up; the peer is created directly in the network
// namespace of pid as eth0, gets guest/30, comes up with lo, and routes
// everything through host. A failure deletes the veth pair.
func (hn *Veths) Setup(pid int, veth string, host, guest netip.Addr) (err error) {
	nsfd, err := hn.openNS(pid)
	if err != nil {
		return fmt.Errorf("launcher: opening the sandbox's network namespace: %w", err)
	}
	defer hn.closeNS(nsfd)

	la := netlink.NewLinkAttrs()
	la.Name = veth
	link := &netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsfd)}
	if err := hn.host.LinkAdd(link); err != nil {
		return fmt.Errorf("launcher: creating veth %s: %w", veth, err)
	}
	defer func() {
		if err != nil {
			_ = hn.Delete(veth)
		}
	}()
	hostLink, err := hn.host.LinkByName(veth)
	if err != nil {
		return fmt.Errorf("launcher: veth %s: %w", veth, err)
	}
	if err := hn.host.AddrAdd(hostLink, &netlink.Addr{IPNet: ipNet(host, 30)}); err != nil {
		return fmt.Errorf("launcher: veth %s: adding address: %w", veth, err)
	}
	if err := hn.host.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("launcher: veth %s: up: %w", veth, err)
	}

	h, closeH, err := hn.inNS(nsfd)
	if err != nil {
		return fmt.Errorf("launcher: netlink in the sandbox's namespace: %w", err)
	}
	defer closeH()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("launcher: sandbox lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("launcher: sandbox lo up: %w", err)
	}
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("launcher: sandbox eth0: %w", err)
	}
	if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipNet(guest, 30)}); err != nil {
		return fmt.Errorf("launcher: sandbox eth0: adding address: %w", err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("launcher: sandbox eth0 up: %w", err)
	}
	route := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(host.AsSlice()), Dst: nil}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("launcher: sandbox default route: %w", err)
	}
	return nil
}

// ipNet is address a with an IPv4 mask of bits bits.
func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// Delete deletes the host side of a veth pair (the peer goes with it).
// A missing link is not an error.
func (hn *Veths) Delete(name string) error {
	link, err := hn.host.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("launcher: veth %s: %w", name, err)
	}
	if err := hn.host.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("launcher: deleting veth %s: %w", name, err)
	}
	return nil
}

// List returns the names of the host's links that match isVeth.
func (hn *Veths) List(isVeth func(string) bool) ([]string, error) {
	links, err := RetryDump(hn.host.LinkList)
	if err != nil {
		return nil, fmt.Errorf("launcher: listing links: %w", err)
	}
	var out []string
	for _, l := range links {
		if isVeth(l.Attrs().Name) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out, nil
}
