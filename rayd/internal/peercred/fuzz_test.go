package peercred

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// appendRow formats r the way the kernel does (net/ipv4/tcp_ipv4.c and
// net/ipv6/tcp_ipv6.c): 8 hex digits for an IPv4 address, 32 for IPv6, each
// 32-bit word printed in order.
func appendRow(b []byte, sl int, r Row, order binary.ByteOrder) []byte {
	b = fmt.Appendf(b, "%4d: ", sl)
	b = appendAddr(b, r.LocalIP, order)
	b = append(b, ' ')
	b = appendAddr(b, r.RemoteIP, order)
	return fmt.Appendf(b, " %02X 00000000:00000000 00:00000000 00000000 %5d %8d %d 2 0000000000000000 20 4 30 10 -1\n",
		r.State, r.UID, 0, r.Inode)
}

func appendAddr(b []byte, a netip.AddrPort, order binary.ByteOrder) []byte {
	var raw []byte
	if a.Addr().Is4() {
		x := a.Addr().As4()
		raw = x[:]
	} else {
		x := a.Addr().As16()
		raw = x[:]
	}
	for i := 0; i < len(raw); i += 4 {
		b = fmt.Appendf(b, "%08X", order.Uint32(raw[i:]))
	}
	return fmt.Appendf(b, ":%04X", a.Port())
}

func formatTable(rows []Row, order binary.ByteOrder) []byte {
	b := []byte(hdr)
	for i, r := range rows {
		b = appendRow(b, i, r, order)
	}
	return b
}

// rowFromBytes builds an arbitrary well-formed row from fuzzer bytes.
func rowFromBytes(d []byte) (Row, bool) {
	const need = 1 + 16 + 2 + 16 + 2 + 1 + 4 + 8
	if len(d) < need {
		return Row{}, false
	}
	v6 := d[0]&1 == 1
	d = d[1:]
	addr := func() netip.Addr {
		var a netip.Addr
		if v6 {
			a = netip.AddrFrom16([16]byte(d[:16]))
		} else {
			a = netip.AddrFrom4([4]byte(d[:4]))
		}
		d = d[16:]
		return a
	}
	port := func() uint16 { p := binary.BigEndian.Uint16(d); d = d[2:]; return p }
	var r Row
	la := addr()
	r.LocalIP = netip.AddrPortFrom(la, port())
	ra := addr()
	r.RemoteIP = netip.AddrPortFrom(ra, port())
	r.State = d[0]
	r.UID = binary.BigEndian.Uint32(d[1:])
	r.Inode = binary.BigEndian.Uint64(d[5:])
	return r, true
}

func FuzzParseTable(f *testing.F) {
	f.Add([]byte(realTCP))
	f.Add([]byte(realTCP6))
	f.Add([]byte(hdr + goodRow))
	f.Add([]byte(""))
	f.Add([]byte(hdr + strings.Replace(goodRow, "0100007F:812B", "0100007F:81+B", 1)))
	f.Add([]byte("\x01\x7f\x00\x00\x01 ... enough bytes to build a structured row from ......"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// 1. Arbitrary input: no panic, and every row that parses formats
		// back to text that parses to the same row, in both word orders.
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			var rows []Row
			err := parseTable(bytes.NewReader(data), order, MaxRows, func(r Row) bool {
				if r.LocalIP.Addr().Zone() != "" || r.RemoteIP.Addr().Zone() != "" {
					t.Fatalf("row with a zone: %+v", r)
				}
				rows = append(rows, r)
				return true
			})
			_ = err
			if len(rows) == 0 {
				continue
			}
			var again []Row
			if err := parseTable(bytes.NewReader(formatTable(rows, order)), order, MaxRows, func(r Row) bool {
				again = append(again, r)
				return true
			}); err != nil {
				t.Fatalf("reformatted rows do not parse: %v", err)
			}
			if len(again) != len(rows) {
				t.Fatalf("round trip: %d rows became %d", len(rows), len(again))
			}
			for i := range rows {
				if rows[i] != again[i] {
					t.Fatalf("round trip row %d: %+v became %+v", i, rows[i], again[i])
				}
			}
		}

		// 2. A well-formed row built from the input round-trips its fields
		// through the kernel format, via the exported parser too.
		want, ok := rowFromBytes(data)
		if !ok {
			return
		}
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian, binary.NativeEndian} {
			var got []Row
			text := formatTable([]Row{want}, order)
			parse := func(fn func(Row) bool) error { return parseTable(bytes.NewReader(text), order, MaxRows, fn) }
			if order == binary.NativeEndian {
				parse = func(fn func(Row) bool) error { return ParseTable(bytes.NewReader(text), fn) }
			}
			if err := parse(func(r Row) bool { got = append(got, r); return true }); err != nil {
				t.Fatalf("%v: well-formed row %q: %v", order, text, err)
			}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("%v: row %+v parsed as %+v from %q", order, want, got, text)
			}
		}
	})
}
