package launcher

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

// dumpAttempts bounds retryDump.
const dumpAttempts = 5

// retryDump repeats a netlink dump the kernel interrupted because the
// table changed meanwhile (NLM_F_DUMP_INTR: other sandboxes starting or
// stopping), whose answer may be incomplete.
func retryDump[T any](dump func() (T, error)) (T, error) {
	var (
		out T
		err error
	)
	for range dumpAttempts {
		if out, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return out, err
}

// hostAddrs returns every IPv4 address assigned to an interface of the
// host's network namespace.
func hostAddrs() ([]netip.Addr, error) {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
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

// setupNetwork creates the sandbox's veth pair: the host side (veth) gets
// host/30 and comes up; the peer is created directly in the network
// namespace of pid as eth0, gets guest/30, comes up with lo, and routes
// everything through host.
func setupNetwork(pid int, veth string, host, guest netip.Addr) (err error) {
	nsfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("launcher: opening the sandbox's network namespace: %w", err)
	}
	defer unix.Close(nsfd)

	la := netlink.NewLinkAttrs()
	la.Name = veth
	link := &netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsfd)}
	if err := netlink.LinkAdd(link); err != nil {
		return fmt.Errorf("launcher: creating veth %s: %w", veth, err)
	}
	defer func() {
		if err != nil {
			_ = deleteVeth(veth)
		}
	}()
	hostLink, err := netlink.LinkByName(veth)
	if err != nil {
		return fmt.Errorf("launcher: veth %s: %w", veth, err)
	}
	if err := netlink.AddrAdd(hostLink, &netlink.Addr{IPNet: ipNet(host, 30)}); err != nil {
		return fmt.Errorf("launcher: veth %s: adding address: %w", veth, err)
	}
	if err := netlink.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("launcher: veth %s: up: %w", veth, err)
	}

	h, err := netlink.NewHandleAt(netns.NsHandle(nsfd), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("launcher: netlink in the sandbox's namespace: %w", err)
	}
	defer h.Close()
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

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// deleteVeth deletes the host side of a veth pair (the peer goes with it).
// A missing link is not an error.
func deleteVeth(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("launcher: veth %s: %w", name, err)
	}
	if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("launcher: deleting veth %s: %w", name, err)
	}
	return nil
}

// listVeths returns the names of the host's links that match isVeth.
func listVeths(isVeth func(string) bool) ([]string, error) {
	links, err := retryDump(netlink.LinkList)
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
