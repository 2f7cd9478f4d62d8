package peercred

import (
	"net/netip"
	"testing"
)

// FuzzParseDiagReply feeds arbitrary datagrams to the sock_diag reply
// parser: it must not panic, and a success must carry an inode.
func FuzzParseDiagReply(f *testing.F) {
	l := netip.MustParseAddrPort("10.0.0.2:9000")
	r := netip.MustParseAddrPort("10.0.0.1:40000")
	f.Add(diagRequest(l, r, diagSeq))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err, done := parseDiagReply(b, diagSeq, l, r)
		if done && err == nil && o.Inode == 0 {
			t.Fatalf("success without an inode: %+v", o)
		}
	})
}
