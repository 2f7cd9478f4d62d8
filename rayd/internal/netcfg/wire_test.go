//go:build linux

package netcfg

import (
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestOneTransaction drives a real *nftables.Conn whose netlink socket is
// replaced by a recorder, and checks that installing a policy is a single
// send: batch begin, the table created exclusively (the first install) or
// deleted and re-created (later ones) with everything in it, batch end.
func TestOneTransaction(t *testing.T) {
	for _, first := range []bool{true, false} {
		testOneTransaction(t, first)
	}
}

func testOneTransaction(t *testing.T, first bool) {
	var sends [][]netlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) == 0 { // a Receive with nothing queued
			return nil, nil
		}
		sends = append(sends, req)
		return req, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{ProxyPort: 8080, DNSPort: 5353, NFT: c, Rules: &fakeRules{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := buildPolicy(&r.opts, policy(t, []string{"10.0.0.0/8", "api.example.com"}, []string{"ALL_TRAFFIC"}))
	if err != nil {
		t.Fatal(err)
	}
	if !first {
		r.want = s // as after an earlier install
	}
	if err := r.install(s); err != nil {
		t.Fatal(err)
	}
	if len(sends) != 1 {
		t.Fatalf("%d sends, want 1", len(sends))
	}
	msgs := sends[0]
	typ := func(m netlink.Message) uint16 { return uint16(m.Header.Type) }
	nft := func(op int) uint16 { return uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | op) }
	if typ(msgs[0]) != unix.NFNL_MSG_BATCH_BEGIN || typ(msgs[len(msgs)-1]) != unix.NFNL_MSG_BATCH_END {
		t.Fatalf("not one batch: first %#x last %#x", typ(msgs[0]), typ(msgs[len(msgs)-1]))
	}
	var seq []uint16
	counts := map[uint16]int{}
	for _, m := range msgs[1 : len(msgs)-1] {
		seq = append(seq, typ(m))
		counts[typ(m)]++
	}
	if first {
		if len(seq) < 1 || seq[0] != nft(unix.NFT_MSG_NEWTABLE) || msgs[1].Header.Flags&netlink.Excl == 0 ||
			counts[nft(unix.NFT_MSG_DELTABLE)] != 0 || counts[nft(unix.NFT_MSG_NEWTABLE)] != 1 {
			t.Errorf("first install: batch does not start with an exclusive create table alone: %#x (flags %v)", seq[:min(3, len(seq))], msgs[1].Header.Flags)
		}
	} else if len(seq) < 3 || seq[0] != nft(unix.NFT_MSG_NEWTABLE) || seq[1] != nft(unix.NFT_MSG_DELTABLE) || seq[2] != nft(unix.NFT_MSG_NEWTABLE) {
		t.Errorf("batch does not start with add, delete, add table: %#x", seq[:min(3, len(seq))])
	}
	if counts[nft(unix.NFT_MSG_NEWCHAIN)] != len(s.chains) || counts[nft(unix.NFT_MSG_NEWSET)] != len(s.sets) ||
		counts[nft(unix.NFT_MSG_NEWRULE)] != len(s.rules) {
		t.Errorf("batch has %d chains, %d sets, %d rules; want %d, %d, %d",
			counts[nft(unix.NFT_MSG_NEWCHAIN)], counts[nft(unix.NFT_MSG_NEWSET)], counts[nft(unix.NFT_MSG_NEWRULE)],
			len(s.chains), len(s.sets), len(s.rules))
	}
}
