// Package peercred finds which user owns the client end of a TCP connection
// that this process accepted over a local interface.
//
// rayd's lifecycle hooks listen on TCP. The platform reaches them from outside
// the sandbox, but code running inside the sandbox can reach the same port over
// loopback. To tell the two apart, [LookupTCP] looks the connection's client
// socket up in the kernel (an exact sock_diag netlink query, or the socket
// tables /proc/self/net/tcp and tcp6 where sock_diag is unavailable) and
// reports the uid that created it. A client socket that lives in another
// network namespace (the platform calling over a veth or from the host) is not
// in those tables at all, and LookupTCP reports [ErrNotFound]; a client socket
// that has already been closed no longer has an owner, and LookupTCP reports
// [ErrOwnerGone] instead of the uid 0 that the kernel prints for such rows.
//
// The table parser, [ParseTable], is a pure function over an [io.Reader] so
// that it can be tested and fuzzed without a kernel. It bounds its work: lines
// longer than [MaxLineLen] bytes and tables with more than [MaxRows] rows are
// rejected with [ErrTooLarge].
//
// LookupTCP is implemented on Linux only; elsewhere it returns
// [ErrUnsupported].
package peercred

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// Limits enforced by [ParseTable].
const (
	// MaxLineLen is the longest line, in bytes and without its newline, that
	// ParseTable accepts. The kernel's lines are about 150 bytes.
	MaxLineLen = 4096
	// MaxRows is the largest number of rows (not counting the header) that
	// ParseTable reads before giving up.
	MaxRows = 1 << 20
)

// TCP states as printed in the "st" column (include/net/tcp_states.h).
const (
	StateEstablished uint8 = 0x01
	StateTimeWait    uint8 = 0x06
	StateListen      uint8 = 0x0A
)

// Sentinel errors; test for them with [errors.Is].
var (
	// ErrNotFound means no socket in this network namespace is the client end
	// of the connection: the client lives in another network namespace, or
	// its socket is already fully gone.
	ErrNotFound = errors.New("peercred: no socket in this network namespace matches the connection")

	// ErrOwnerGone means the client socket was found but no longer has an
	// owner: it is in TIME_WAIT or has been orphaned (inode 0) by a close.
	// The kernel prints uid 0 for such rows, which must not be mistaken for
	// root. ErrOwnerGone does not match ErrNotFound.
	ErrOwnerGone = errors.New("peercred: the client socket has been closed and has no owner")

	// ErrMalformed means a socket table is not in the kernel's format.
	ErrMalformed = errors.New("peercred: malformed socket table")

	// ErrTooLarge means a socket table exceeds [MaxLineLen] or [MaxRows].
	ErrTooLarge = errors.New("peercred: socket table exceeds parser limits")

	// ErrUnsupported is returned by LookupTCP on platforms other than Linux.
	// It also matches [errors.ErrUnsupported].
	ErrUnsupported = fmt.Errorf("peercred: TCP peer lookup is only implemented on Linux: %w", errors.ErrUnsupported)
)

// Owner describes the socket at the client end of a connection.
type Owner struct {
	UID   uint32 // uid that created the socket, as seen from this process's user namespace
	Inode uint64 // socket inode, never 0 in a successful lookup
	State uint8  // TCP state, see the State* constants
}

// Row is one parsed row of /proc/net/tcp or /proc/net/tcp6.
//
// Addresses are reported as the kernel prints them: rows of the tcp table have
// IPv4 addresses, rows of the tcp6 table have IPv6 addresses, including
// IPv4-mapped ones (::ffff:a.b.c.d) for IPv4 peers of dual-stack sockets.
// Addresses never carry a zone.
type Row struct {
	LocalIP  netip.AddrPort // the socket's own address ("local_address")
	RemoteIP netip.AddrPort // its peer's address ("rem_address")
	State    uint8          // "st"
	UID      uint32         // "uid"; 0 for TIME_WAIT rows
	Inode    uint64         // "inode"; 0 for TIME_WAIT and orphaned sockets
}

// ParseTable reads a socket table in the format of /proc/net/tcp or
// /proc/net/tcp6 (a header line, then one row per socket) and calls fn for
// each row in order until fn returns false.
//
// Addresses are decoded in this machine's byte order, which is the order the
// running kernel prints them in: each 32-bit word of an address is printed as
// a host-order integer, so on little-endian machines 127.0.0.1 reads
// 0100007F.
//
// ParseTable returns nil at the end of the input or when fn returns false, an
// error wrapping [ErrMalformed] when the input is not such a table, an error
// wrapping [ErrTooLarge] when a limit is exceeded, and read errors as they
// come. Rows already passed to fn stay valid when a later row fails.
// Empty input is an empty table.
func ParseTable(r io.Reader, fn func(Row) bool) error {
	return parseTable(r, binary.NativeEndian, MaxRows, fn)
}

// parseTable is ParseTable with the byte order of the address words and the
// row limit as parameters, so that tests can pin both.
func parseTable(r io.Reader, order binary.ByteOrder, maxRows int, fn func(Row) bool) error {
	sc := bufio.NewScanner(r)
	// One extra byte so that a line of exactly MaxLineLen bytes fits with its
	// newline; anything longer makes the scanner fail with ErrTooLong.
	sc.Buffer(make([]byte, 0, 512), MaxLineLen+1)
	lineNo, rows := 0, 0
	header := false
	for sc.Scan() {
		lineNo++
		line := sc.Bytes()
		if len(line) > MaxLineLen {
			return fmt.Errorf("%w: line %d is longer than %d bytes", ErrTooLarge, lineNo, MaxLineLen)
		}
		var f [10][]byte
		n := splitFields(line, f[:])
		if n == 0 {
			continue // blank line
		}
		if !header {
			if string(f[0]) != "sl" {
				return fmt.Errorf("%w: line %d: missing header line", ErrMalformed, lineNo)
			}
			header = true
			continue
		}
		if rows >= maxRows {
			return fmt.Errorf("%w: more than %d rows", ErrTooLarge, maxRows)
		}
		rows++
		if n < len(f) {
			return fmt.Errorf("%w: line %d: %d fields, want at least %d", ErrMalformed, lineNo, n, len(f))
		}
		row, err := parseRow(&f, order)
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrMalformed, lineNo, err)
		}
		if !fn(row) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: line %d is longer than %d bytes", ErrTooLarge, lineNo+1, MaxLineLen)
		}
		return fmt.Errorf("peercred: reading socket table: %w", err)
	}
	return nil
}

// splitFields stores the first len(dst) space-separated fields of line in dst
// and returns how many it stored.
func splitFields(line []byte, dst [][]byte) int {
	n := 0
	i := 0
	for n < len(dst) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		dst[n] = line[i:j]
		n++
		i = j
	}
	return n
}

// parseRow decodes the fields of one row:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
func parseRow(f *[10][]byte, order binary.ByteOrder) (Row, error) {
	var row Row
	sl := f[0]
	if len(sl) < 2 || sl[len(sl)-1] != ':' {
		return row, errors.New("bad slot number")
	}
	if _, ok := parseDec(sl[:len(sl)-1], 64); !ok {
		return row, errors.New("bad slot number")
	}
	var err error
	if row.LocalIP, err = parseAddrPort(f[1], order); err != nil {
		return row, fmt.Errorf("local_address: %w", err)
	}
	if row.RemoteIP, err = parseAddrPort(f[2], order); err != nil {
		return row, fmt.Errorf("rem_address: %w", err)
	}
	if len(f[3]) != 2 {
		return row, errors.New("bad state")
	}
	st, ok := parseHex(f[3])
	if !ok {
		return row, errors.New("bad state")
	}
	row.State = uint8(st)
	uid, ok := parseDec(f[7], 32)
	if !ok {
		return row, errors.New("bad uid")
	}
	row.UID = uint32(uid)
	if row.Inode, ok = parseDec(f[9], 64); !ok {
		return row, errors.New("bad inode")
	}
	return row, nil
}

// parseAddrPort decodes "0100007F:1F90" (IPv4) or a 32-digit IPv6 address
// followed by ":" and a 4-digit port. Each group of 8 hex digits is a 32-bit
// word of the address in host byte order.
func parseAddrPort(b []byte, order binary.ByteOrder) (netip.AddrPort, error) {
	if len(b) != 8+1+4 && len(b) != 32+1+4 {
		return netip.AddrPort{}, errors.New("bad length")
	}
	hexIP, port := b[:len(b)-5], b[len(b)-4:]
	if b[len(b)-5] != ':' {
		return netip.AddrPort{}, errors.New("missing port")
	}
	var ip [16]byte
	for w := 0; w*8 < len(hexIP); w++ {
		v, ok := parseHex(hexIP[w*8 : w*8+8])
		if !ok {
			return netip.AddrPort{}, errors.New("bad address")
		}
		order.PutUint32(ip[w*4:], uint32(v))
	}
	p, ok := parseHex(port)
	if !ok {
		return netip.AddrPort{}, errors.New("bad port")
	}
	var addr netip.Addr
	if len(hexIP) == 8 {
		addr = netip.AddrFrom4([4]byte(ip[:4]))
	} else {
		addr = netip.AddrFrom16(ip)
	}
	return netip.AddrPortFrom(addr, uint16(p)), nil
}

// parseHex parses at most 8 hex digits (either case).
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// parseDec parses an unsigned decimal number that fits in bits bits.
func parseDec(b []byte, bits uint) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	limit := uint64(1)<<bits - 1
	if bits == 64 {
		limit = ^uint64(0)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// addrPort converts a net.Addr of a TCP connection to an AddrPort without
// zone and with IPv4-mapped addresses unmapped, so that both sides of a
// comparison use one form.
func addrPort(a net.Addr) (netip.AddrPort, error) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case nil:
		return ap, errors.New("peercred: nil address")
	case *net.TCPAddr:
		if a == nil {
			return ap, errors.New("peercred: nil address")
		}
		ap = a.AddrPort()
	default:
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return ap, fmt.Errorf("peercred: address of type %T is not ip:port", a)
		}
	}
	if !ap.IsValid() {
		return ap, errors.New("peercred: invalid address")
	}
	return canonical(ap), nil
}

// canonical unmaps IPv4-mapped addresses and drops zones.
func canonical(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}
