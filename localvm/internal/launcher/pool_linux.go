package launcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/hostnet"
)

// A platform's pool of pre-booted sandboxes (see package registry) takes
// sandboxes launched with no Internet access and the default limits, under
// a microVM id nobody has seen yet, and hands each out once, to one
// request: Assign then gives it that request's egress and limits. Nothing
// of a pooled sandbox is shared with any other: each one is launched
// individually (its own namespaces, cgroup, veth, /30, uid block and
// files), nothing is cloned.

// PoolSupport reports whether sandboxes can be launched ahead of the
// requests they are handed out for: nil for privileged sandboxes (their
// egress is nftables rules and their limits cgroup files, both set from
// outside at any time), otherwise an error wrapping ErrNoPool that says
// why not (a rootless sandbox's Internet access is a slirp4netns started
// with it, and it has no cgroup).
func (l *Launcher) PoolSupport() error {
	switch {
	case l.priv && l.cgErr == nil:
		return nil
	case l.priv:
		return fmt.Errorf("%w, and this platform has no usable cgroups", ErrNoPool)
	case l.rootless:
		return fmt.Errorf("%w: this platform runs %s", ErrNoPool, IsolationRootless)
	}
	return fmt.Errorf("%w: this platform runs unisolated", ErrNoPool)
}

// Assign applies a's egress and limits to a sandbox launched for the
// pool (see Instance.Assign).
func (i *instance) Assign(ctx context.Context, a Assignment) error {
	if !i.rec.Privileged || i.l.cg == nil {
		return fmt.Errorf("launcher: assigning sandbox %s: %w", i.rec.ID, ErrNotPrivileged)
	}
	if a.MemoryBytes < 0 || a.PidsMax < 0 {
		return errors.New("launcher: negative limits")
	}
	mem, pids := a.MemoryBytes, a.PidsMax
	if mem == 0 {
		mem = DefaultMemoryBytes
	}
	if pids == 0 {
		pids = DefaultPidsMax
	}
	i.termMu.Lock() // not while Terminate removes the cgroups and rules
	defer i.termMu.Unlock()
	if i.cleaned || !i.alive() {
		return fmt.Errorf("launcher: assigning sandbox %s: %w", i.rec.ID, ErrGone)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if mem != i.memBytes || pids != i.pidsMax {
		return fmt.Errorf("%w (memory %d, pids %d)", ErrAssignLimits, i.memBytes, i.pidsMax)
	}
	if a.Internet != i.rec.Internet && !a.Internet {
		return fmt.Errorf("launcher: sandbox %s has Internet access, which cannot be taken away", i.rec.ID)
	}
	if err := i.l.cg.WriteLimits(i.rec.ID, mem, pids); err != nil {
		return err
	}
	if a.Internet && !i.rec.Internet {
		guest, err := netip.ParseAddr(i.rec.GuestIP)
		if err != nil {
			return fmt.Errorf("launcher: sandbox %s: bad guest address", i.rec.ID)
		}
		if err := hostnet.EnableForwarding(); err != nil {
			return err
		}
		// A fresh id: no rule of it can exist yet.
		if err := i.l.fw.Install(i.rec.ID, i.rec.Veth, guest, true, true); err != nil {
			return err
		}
		i.rec.Internet = true
	}
	return nil
}

// Conntrack. What a sandbox leaves in the kernel's connection tracking
// table (its NATed flows to the Internet, the platform's connections to
// its rayd) must not apply to the next sandbox that gets its address: the
// firewall's "ct state established" rules accept replies before any
// per-sandbox rule is looked at. So Terminate deletes the entries of the
// sandbox's address before its veth goes (flushConntrack: two dumps the
// kernel filters, about 10 ms each here), and Sweep, at start-up, those of
// every address of the subnet no sandbox has now (sweepConntrack: one
// full dump), what a killed platform or a sandbox whose network namespace
// vanished with its rayd left. Launches need not look: every free address
// is clean. A failure is logged (once per launcher) and fails nothing:
// the entries expire by themselves, and a machine whose conntrack table
// cannot be edited must still run sandboxes.

// flushConntrack deletes the conntrack entries whose original source or
// destination is addr.
func (l *Launcher) flushConntrack(addr netip.Addr) {
	l.conntrackFailed(flushConntrack(addr))
}

func (l *Launcher) conntrackFailed(err error) {
	if err != nil {
		l.ctOnce.Do(func() {
			l.log.Warn("launcher: cannot delete a sandbox address's conntrack entries: they expire by themselves, meanwhile replies to a former sandbox's flows could reach the next one with its address", "err", err.Error())
		})
	}
}

// sweepConntrack deletes the conntrack entries whose original source or
// destination lies in the launcher's subnet, in a /30 that no sandbox
// (of any platform: its host side is an address of the host) or launch
// of this launcher holds.
func (l *Launcher) sweepConntrack() {
	host, err := l.net.HostAddrs()
	if err != nil {
		l.conntrackFailed(err)
		return
	}
	l.mu.Lock()
	held := map[netip.Prefix]bool{}
	for slot := range l.slots {
		held[slot] = true
	}
	l.mu.Unlock()
	for _, a := range host {
		if l.subnet.Contains(a) {
			p, _ := a.Prefix(30)
			held[p] = true
		}
	}
	stale := func(ip net.IP) bool {
		a, ok := netip.AddrFromSlice(ip.To4())
		if !ok || !l.subnet.Contains(a) {
			return false
		}
		p, _ := a.Prefix(30)
		return !held[p]
	}
	_, err = hostnet.RetryDump(func() (uint, error) {
		return netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flowFilter(func(f *netlink.ConntrackFlow) bool {
			return stale(f.Forward.SrcIP) || stale(f.Forward.DstIP)
		}))
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("launcher: conntrack: sweeping the entries of %s: %w", l.subnet, err)
	}
	l.conntrackFailed(err)
}

// flowFilter is a netlink.CustomConntrackFilter.
type flowFilter func(*netlink.ConntrackFlow) bool

func (f flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool { return f(flow) }

func flushConntrack(addr netip.Addr) error {
	if !addr.Is4() {
		return nil
	}
	var errs []error
	for _, src := range []bool{true, false} {
		err := deleteFlows(addr, src)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
			err = nil // no conntrack (netlink) here: no table to clean
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launcher: conntrack: removing the entries of %s: %w", addr, err)
	}
	return nil
}

// Conntrack netlink attributes (linux/netfilter/nfnetlink_conntrack.h)
// that package nl lacks.
const (
	nfnlSubsysCtnetlink = 1  // NFNL_SUBSYS_CTNETLINK
	ctaFilter           = 25 // CTA_FILTER
	ctaFilterOrigFlags  = 1  // CTA_FILTER_ORIG_FLAGS
	ctaFilterReplyFlags = 2  // CTA_FILTER_REPLY_FLAGS
	ctaFilterFlagIPSrc  = 1 << 0
	ctaFilterFlagIPDst  = 1 << 1
	nlaTypeMask         = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)

// deleteFlows deletes the IPv4 conntrack entries whose original source
// (src) or destination (!src) is addr. The dump asks the kernel to filter
// (CTA_FILTER, Linux 5.8 and later): listing the whole table and parsing
// it in Go costs about 20 ms per thousand entries. An older kernel ignores
// the filter and dumps everything, so each entry's address is checked
// here too before it is deleted.
func deleteFlows(addr netip.Addr, src bool) error {
	ip4 := addr.As4()
	ipAttr, flag := nl.CTA_IP_V4_DST, uint32(ctaFilterFlagIPDst)
	if src {
		ipAttr, flag = nl.CTA_IP_V4_SRC, ctaFilterFlagIPSrc
	}
	var err error
	for range hostnet.DumpAttempts {
		req := nl.NewNetlinkRequest(nfnlSubsysCtnetlink<<8|nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP)
		req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
		orig := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG, nil)
		tip := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
		tip.AddChild(nl.NewRtAttr(ipAttr, ip4[:]))
		orig.AddChild(tip)
		req.AddData(orig)
		filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
		filter.AddChild(nl.NewRtAttr(ctaFilterOrigFlags, binary.NativeEndian.AppendUint32(nil, flag)))
		filter.AddChild(nl.NewRtAttr(ctaFilterReplyFlags, binary.NativeEndian.AppendUint32(nil, 0)))
		req.AddData(filter)
		var msgs [][]byte
		msgs, err = req.Execute(unix.NETLINK_NETFILTER, 0)
		if err != nil && !errors.Is(err, nl.ErrDumpInterrupted) {
			return err
		}
		for _, m := range msgs {
			if len(m) < 4 || !flowHas(m[4:], ipAttr, ip4) {
				continue
			}
			del := nl.NewNetlinkRequest(nfnlSubsysCtnetlink<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
			del.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
			del.AddRawData(m[4:])
			if _, derr := del.Execute(unix.NETLINK_NETFILTER, 0); derr != nil && !errors.Is(derr, unix.ENOENT) {
				return derr
			}
		}
		if err == nil {
			return nil
		}
	}
	return err
}

// flowHas reports whether the attributes of a conntrack entry (after its
// nfgenmsg) have ip as the original tuple's address attr (CTA_IP_V4_SRC
// or CTA_IP_V4_DST).
func flowHas(attrs []byte, attr int, ip [4]byte) bool {
	orig, ok := nlaFind(attrs, nl.CTA_TUPLE_ORIG)
	if !ok {
		return false
	}
	tip, ok := nlaFind(orig, nl.CTA_TUPLE_IP)
	if !ok {
		return false
	}
	v, ok := nlaFind(tip, attr)
	return ok && len(v) == 4 && [4]byte(v) == ip
}

// nlaFind returns the payload of the first netlink attribute of type typ
// in b.
func nlaFind(b []byte, typ int) ([]byte, bool) {
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < unix.SizeofNlAttr || l > len(b) {
			return nil, false
		}
		if int(t) == typ {
			return b[unix.SizeofNlAttr:l], true
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(b) {
			return nil, false
		}
		b = b[next:]
	}
	return nil, false
}
