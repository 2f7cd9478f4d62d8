//go:build linux

package hostnet

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// flowAttrs are a conntrack entry's attributes (after its nfgenmsg) with
// src and dst as the original tuple's addresses, after an unrelated
// attribute.
func flowAttrs(src, dst [4]byte) []byte {
	orig := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG, nil)
	tip := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	tip.AddChild(nl.NewRtAttr(nl.CTA_IP_V4_SRC, src[:]))
	tip.AddChild(nl.NewRtAttr(nl.CTA_IP_V4_DST, dst[:]))
	orig.AddChild(tip)
	other := nl.NewRtAttr(nl.CTA_TUPLE_REPLY, []byte{1, 2, 3}) // padded to 8 bytes
	return append(other.Serialize(), orig.Serialize()...)
}

// TestFlowHas: the original tuple's source or destination, found past
// other attributes; truncated or malformed attributes match nothing.
func TestFlowHas(t *testing.T) {
	src, dst := [4]byte{10, 214, 0, 2}, [4]byte{1, 1, 1, 1}
	b := flowAttrs(src, dst)
	if !flowHas(b, nl.CTA_IP_V4_SRC, src) || !flowHas(b, nl.CTA_IP_V4_DST, dst) {
		t.Fatal("addresses not found")
	}
	if flowHas(b, nl.CTA_IP_V4_SRC, dst) || flowHas(b, nl.CTA_IP_V4_DST, src) {
		t.Fatal("an address found in the wrong field")
	}
	for n := range len(b) {
		if flowHas(b[:n], nl.CTA_IP_V4_DST, dst) {
			t.Fatalf("found in the first %d bytes", n)
		}
	}
	bad := append([]byte{}, b...)
	bad[0] = 2 // an attribute shorter than its header
	if flowHas(bad, nl.CTA_IP_V4_SRC, src) {
		t.Fatal("found past a malformed attribute")
	}
}

// FuzzFlowHas: the kernel's conntrack dump is parsed without a panic, and
// an address is only ever found inside the bytes given.
func FuzzFlowHas(f *testing.F) {
	f.Add(flowAttrs([4]byte{10, 0, 0, 2}, [4]byte{8, 8, 8, 8}), true)
	f.Add([]byte{4, 0, 1, 0}, false)
	f.Fuzz(func(t *testing.T, b []byte, src bool) {
		attr := nl.CTA_IP_V4_DST
		if src {
			attr = nl.CTA_IP_V4_SRC
		}
		if v, ok := nlaFind(b, nl.CTA_TUPLE_ORIG); ok && len(v) > len(b) {
			t.Fatalf("payload of %d bytes from %d", len(v), len(b))
		}
		_ = flowHas(b, attr, [4]byte{10, 0, 0, 2})
	})
}
