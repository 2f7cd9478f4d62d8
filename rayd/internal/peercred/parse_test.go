package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

// Tables captured from a little-endian (amd64) Linux 6.18 machine, trailing
// padding included. They contain: a v4 listener, an established v4 pair owned
// by uid 1000, a v4 TIME_WAIT row; a v6 listener on ::1, a dual-stack
// listener on ::, an IPv4-mapped accepted socket, v4-mapped and v6 TIME_WAIT
// rows.
const realTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1065 1 00000000245934d7 100 0 0 10 0                      
   1: 0100007F:8CDF 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 11929 2 000000007e1210f1 100 0 0 10 0                     
   2: 0100007F:812B 0100007F:BFA4 06 00000000:00000000 03:0000161E 00000000     0        0 0 3 000000003911d96c                                      
   3: 0100007F:8CDF 0100007F:BA76 01 00000000:00000000 02:000005CC 00000000  1000        0 11936 2 00000000b727700e 20 0 0 10 -1                     
   4: 0100007F:BA76 0100007F:8CDF 01 00000000:00000000 02:000005CC 00000000  1000        0 11935 3 00000000f936026d 20 0 0 10 -1                     
   5: 0100007F:A064 0100007F:AD95 01 00000000:00000000 02:000005CC 00000000  1000        0 11939 3 0000000021aba5a7 20 0 0 10 -1                     
`

const realTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:8639 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 11931 2 0000000077e644d8 100 0 0 10 0
   1: 00000000000000000000000000000000:AD95 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 11933 2 00000000ec66d09f 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:AD95 0000000000000000FFFF00000100007F:A064 01 00000000:00000000 02:000005CC 00000000  1000        0 11940 2 000000008ad5f6db 20 0 0 10 -1
   3: 0000000000000000FFFF00000100007F:9381 0000000000000000FFFF00000100007F:E9FC 06 00000000:00000000 03:0000161D 00000000     0        0 0 3 000000007d6720bd
   4: 00000000000000000000000001000000:9D14 00000000000000000000000001000000:82B9 06 00000000:00000000 03:00001612 00000000     0        0 0 3 0000000092c4d653
   5: B80D01200000000000000000EFBEADDE:D431 B80D0120000000000000000001000000:01BB 01 00000000:00000000 02:000005CC 00000000  1001        0 424242 2 0000000077e644d8 20 0 0 10 -1
`

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func parseAllLE(t *testing.T, table string) []Row {
	t.Helper()
	var rows []Row
	if err := parseTable(strings.NewReader(table), binary.LittleEndian, MaxRows, func(r Row) bool {
		rows = append(rows, r)
		return true
	}); err != nil {
		t.Fatalf("parseTable: %v", err)
	}
	return rows
}

func TestParseRealTCP(t *testing.T) {
	want := []Row{
		{ap("0.0.0.0:2024"), ap("0.0.0.0:0"), StateListen, 0, 1065},
		{ap("127.0.0.1:36063"), ap("0.0.0.0:0"), StateListen, 1000, 11929},
		{ap("127.0.0.1:33067"), ap("127.0.0.1:49060"), StateTimeWait, 0, 0},
		{ap("127.0.0.1:36063"), ap("127.0.0.1:47734"), StateEstablished, 1000, 11936},
		{ap("127.0.0.1:47734"), ap("127.0.0.1:36063"), StateEstablished, 1000, 11935},
		{ap("127.0.0.1:41060"), ap("127.0.0.1:44437"), StateEstablished, 1000, 11939},
	}
	checkRows(t, parseAllLE(t, realTCP), want)
}

func TestParseRealTCP6(t *testing.T) {
	want := []Row{
		{ap("[::1]:34361"), ap("[::]:0"), StateListen, 1000, 11931},
		{ap("[::]:44437"), ap("[::]:0"), StateListen, 1000, 11933},
		{ap("[::ffff:127.0.0.1]:44437"), ap("[::ffff:127.0.0.1]:41060"), StateEstablished, 1000, 11940},
		{ap("[::ffff:127.0.0.1]:37761"), ap("[::ffff:127.0.0.1]:59900"), StateTimeWait, 0, 0},
		{ap("[::1]:40212"), ap("[::1]:33465"), StateTimeWait, 0, 0},
		{ap("[2001:db8::dead:beef]:54321"), ap("[2001:db8::1]:443"), StateEstablished, 1001, 424242},
	}
	rows := parseAllLE(t, realTCP6)
	checkRows(t, rows, want)
	// The mapped form is kept as printed: it is an IPv6 row.
	if a := rows[2].LocalIP.Addr(); !a.Is4In6() || a.Unmap() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("row 2 local = %v, want ::ffff:127.0.0.1", a)
	}
}

func checkRows(t *testing.T, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestParseNativeOrder checks that the exported ParseTable decodes in the
// host's order: the captured tables are little-endian.
func TestParseNativeOrder(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("big-endian host: the captured tables are little-endian")
	}
	var got []Row
	if err := ParseTable(strings.NewReader(realTCP6), func(r Row) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	checkRows(t, got, parseAllLE(t, realTCP6))
}

// TestWordOrder pins the decoding of each 32-bit word on both kinds of hosts.
func TestWordOrder(t *testing.T) {
	for _, tc := range []struct {
		order binary.ByteOrder
		text  string
		want  string
	}{
		{binary.LittleEndian, "0100007F:0050", "127.0.0.1:80"},
		{binary.BigEndian, "7F000001:0050", "127.0.0.1:80"},
		{binary.LittleEndian, "0000000000000000FFFF00000A00020F:1F90", "[::ffff:15.2.0.10]:8080"},
		{binary.BigEndian, "00000000000000000000FFFF0F02000A:1F90", "[::ffff:15.2.0.10]:8080"},
		{binary.LittleEndian, "B80D0120000000000000000001000000:FFFF", "[2001:db8::1]:65535"},
		{binary.BigEndian, "20010DB8000000000000000000000001:FFFF", "[2001:db8::1]:65535"},
		{binary.LittleEndian, "000080FE000000000000000000FFFFFF:0001", "[fe80::ffff:ff00]:1"},
	} {
		got, err := parseAddrPort([]byte(tc.text), tc.order)
		if err != nil || got != ap(tc.want) {
			t.Errorf("parseAddrPort(%q, %v) = %v, %v; want %v", tc.text, tc.order, got, err, tc.want)
		}
	}
}

func TestParseStop(t *testing.T) {
	n := 0
	err := parseTable(strings.NewReader(realTCP), binary.LittleEndian, MaxRows, func(Row) bool { n++; return n < 2 })
	if err != nil || n != 2 {
		t.Fatalf("got n=%d err=%v, want 2 rows and nil", n, err)
	}
}

const hdr = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
const goodRow = "   0: 0100007F:812B 0100007F:BFA4 01 00000000:00000000 02:000005CC 00000000  1000        0 12785 2 00000000dc7f4884 20 0 0 10 -1\n"

func TestParseErrors(t *testing.T) {
	long := hdr + "   0: 0100007F:812B 0100007F:BFA4 01 00000000:00000000 02:000005CC 00000000  1000        0 12785 2" + strings.Repeat(" x", 3000) + "\n"
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"no header", goodRow, ErrMalformed},
		{"short row", hdr + "   0: 0100007F:812B 0100007F:BFA4 01 00000000:00000000\n", ErrMalformed},
		{"bad slot", hdr + strings.Replace(goodRow, "0:", "x:", 1), ErrMalformed},
		{"slot without colon", hdr + strings.Replace(goodRow, "0:", "0 ", 1), ErrMalformed},
		{"bad address hex", hdr + strings.Replace(goodRow, "0100007F:812B", "0100007G:812B", 1), ErrMalformed},
		{"bad address length", hdr + strings.Replace(goodRow, "0100007F:812B", "100007F:812B", 1), ErrMalformed},
		{"bad port", hdr + strings.Replace(goodRow, "0100007F:812B", "0100007F:81+B", 1), ErrMalformed},
		{"missing port colon", hdr + strings.Replace(goodRow, "0100007F:812B", "0100007F0812B", 1), ErrMalformed},
		{"bad state", hdr + strings.Replace(goodRow, " 01 ", " 1 ", 1), ErrMalformed},
		{"negative uid", hdr + strings.Replace(goodRow, " 1000 ", " -1 ", 1), ErrMalformed},
		{"uid overflow", hdr + strings.Replace(goodRow, " 1000 ", " 4294967296 ", 1), ErrMalformed},
		{"inode overflow", hdr + strings.Replace(goodRow, " 12785 ", " 18446744073709551616 ", 1), ErrMalformed},
		{"long line", long, ErrTooLarge},
		{"long last line without newline", strings.TrimSuffix(long, "\n"), ErrTooLarge},
		{"long header", strings.Repeat("x", MaxLineLen+1) + "\n", ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseTable(strings.NewReader(tc.in), binary.LittleEndian, MaxRows, func(Row) bool { return true })
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		rows     int
	}{
		{"empty", "", 0},
		{"header only", hdr, 0},
		{"blank lines", "\n" + hdr + "\n" + goodRow + "  \n", 1},
		{"no final newline", hdr + strings.TrimSuffix(goodRow, "\n"), 1},
		{"max uid and inode", hdr + strings.Replace(strings.Replace(goodRow, " 1000 ", " 4294967295 ", 1), " 12785 ", " 18446744073709551615 ", 1), 1},
		{"line of exactly MaxLineLen", hdr + strings.TrimSuffix(goodRow, "\n") + strings.Repeat(" ", MaxLineLen-len(goodRow)+1) + "\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := parseTable(strings.NewReader(tc.in), binary.LittleEndian, MaxRows, func(Row) bool { n++; return true })
			if err != nil || n != tc.rows {
				t.Fatalf("got %d rows, err %v; want %d rows", n, err, tc.rows)
			}
		})
	}
}

func TestParseRowLimit(t *testing.T) {
	in := hdr + strings.Repeat(goodRow, 4)
	n := 0
	err := parseTable(strings.NewReader(in), binary.LittleEndian, 4, func(Row) bool { n++; return true })
	if err != nil || n != 4 {
		t.Fatalf("4 rows with limit 4: n=%d err=%v", n, err)
	}
	n = 0
	err = parseTable(strings.NewReader(in+goodRow), binary.LittleEndian, 4, func(Row) bool { n++; return true })
	if !errors.Is(err, ErrTooLarge) || n != 4 {
		t.Fatalf("5 rows with limit 4: n=%d err=%v, want 4 rows then ErrTooLarge", n, err)
	}
}

func TestParseReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader(hdr+goodRow), iotest.ErrReader(errors.New("boom")))
	n := 0
	err := parseTable(r, binary.LittleEndian, MaxRows, func(Row) bool { n++; return true })
	if err == nil || errors.Is(err, ErrMalformed) || n != 1 {
		t.Fatalf("n=%d err=%v, want 1 row then the read error", n, err)
	}
}

func TestAddrPortCanonical(t *testing.T) {
	for _, tc := range []struct {
		in   net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80}, "127.0.0.1:80"},             // 16-byte form
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 80}, "10.0.0.1:80"},           // 4-byte form
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"}, "[fe80::1]:80"}, // zone dropped
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, "[::1]:1"},
		{stringAddr("[::ffff:1.2.3.4]:5"), "1.2.3.4:5"},
	} {
		got, err := addrPort(tc.in)
		if err != nil || got != ap(tc.want) {
			t.Errorf("addrPort(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []net.Addr{nil, (*net.TCPAddr)(nil), stringAddr("/tmp/sock"), &net.TCPAddr{}} {
		if _, err := addrPort(bad); err == nil {
			t.Errorf("addrPort(%#v) succeeded", bad)
		}
	}
}

type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

func ExampleParseTable() {
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1\n"
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		// Big-endian kernels print the words the other way round.
		table = strings.ReplaceAll(table, "0100007F", "7F000001")
	}
	err := ParseTable(strings.NewReader(table), func(r Row) bool {
		fmt.Println(r.LocalIP, "->", r.RemoteIP, "uid", r.UID, "inode", r.Inode)
		return true
	})
	fmt.Println(err)
	// Output:
	// 127.0.0.1:8080 -> 127.0.0.1:50000 uid 1000 inode 4242
	// <nil>
}
