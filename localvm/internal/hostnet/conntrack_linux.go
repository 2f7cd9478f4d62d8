package hostnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// SweepConntrack deletes the IPv4 conntrack entries whose original source
// or destination address stale accepts, in one full dump. A kernel
// without conntrack over netlink has nothing to delete.
func SweepConntrack(stale func(netip.Addr) bool) error {
	match := func(ip net.IP) bool {
		a, ok := netip.AddrFromSlice(ip.To4())
		return ok && stale(a)
	}
	_, err := RetryDump(func() (uint, error) {
		return netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flowFilter(func(f *netlink.ConntrackFlow) bool {
			return match(f.Forward.SrcIP) || match(f.Forward.DstIP)
		}))
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
		err = nil
	}
	return err
}

// flowFilter is a netlink.CustomConntrackFilter.
type flowFilter func(*netlink.ConntrackFlow) bool

func (f flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool { return f(flow) }

// FlushConntrack deletes the IPv4 conntrack entries whose original source
// or destination is addr. A kernel without conntrack over netlink has
// nothing to delete.
func FlushConntrack(addr netip.Addr) error {
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
	for range DumpAttempts {
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
