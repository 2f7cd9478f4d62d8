package egress

import (
	"encoding/binary"
	"net/netip"
)

// SOCKS5 constants (RFC 1928).
const (
	socksVersion       = 0x05
	socksMethodNoAuth  = 0x00
	socksMethodNone    = 0xff
	socksCmdConnect    = 0x01
	socksAtypIPv4      = 0x01
	socksAtypDomain    = 0x03
	socksAtypIPv6      = 0x04
	socksRepSucceeded  = 0x00
	socksRepFailure    = 0x01
	socksRepNotAllowed = 0x02
	socksRepHostUnr    = 0x04
	socksRepConnRefuse = 0x05
	socksRepCmdUnsupp  = 0x07
	socksRepAtypUnsupp = 0x08
)

// socksError is a SOCKS5 request error with the reply code to send.
type socksError struct{ rep byte }

func (e *socksError) Error() string { return "egress: socks5 request refused" }

// parseSOCKSGreeting parses the client greeting (VER NMETHODS METHODS)
// at the start of b. It returns the greeting's length and whether the
// no-authentication method is offered.
func parseSOCKSGreeting(b []byte) (n int, noAuth bool, err error) {
	if len(b) < 2 {
		if len(b) == 1 && b[0] != socksVersion {
			return 0, false, errBadRequest
		}
		return 0, false, errNeedMore
	}
	if b[0] != socksVersion || b[1] == 0 {
		return 0, false, errBadRequest
	}
	n = 2 + int(b[1])
	if len(b) < n {
		return 0, false, errNeedMore
	}
	for _, m := range b[2:n] {
		if m == socksMethodNoAuth {
			noAuth = true
		}
	}
	return n, noAuth, nil
}

// parseSOCKSRequest parses a request (VER CMD RSV ATYP DST.ADDR
// DST.PORT) at the start of b. Only CONNECT is accepted. A *socksError
// carries the reply code for a well-formed but unsupported request.
func parseSOCKSRequest(b []byte) (target, int, error) {
	if len(b) < 5 {
		if len(b) >= 1 && b[0] != socksVersion {
			return target{}, 0, errBadRequest
		}
		return target{}, 0, errNeedMore
	}
	if b[0] != socksVersion || b[2] != 0x00 {
		return target{}, 0, errBadRequest
	}
	var alen, off int
	switch b[3] {
	case socksAtypIPv4:
		alen, off = 4, 4
	case socksAtypIPv6:
		alen, off = 16, 4
	case socksAtypDomain:
		alen, off = int(b[4]), 5
		if alen == 0 {
			return target{}, 0, &socksError{socksRepFailure}
		}
	default:
		return target{}, 0, &socksError{socksRepAtypUnsupp}
	}
	n := off + alen + 2
	if len(b) < n {
		return target{}, 0, errNeedMore
	}
	if b[1] != socksCmdConnect {
		return target{}, 0, &socksError{socksRepCmdUnsupp}
	}
	port := binary.BigEndian.Uint16(b[off+alen : n])
	if port == 0 {
		return target{}, 0, &socksError{socksRepFailure}
	}
	var t target
	switch b[3] {
	case socksAtypIPv4:
		a := netip.AddrFrom4([4]byte(b[off : off+4]))
		t = target{host: a.String(), isIP: true, addr: a}
	case socksAtypIPv6:
		a := netip.AddrFrom16([16]byte(b[off : off+16]))
		t = target{host: a.String(), isIP: true, addr: a}
	default:
		var err error
		t, err = normalizeHost(string(b[off : off+alen]))
		if err != nil {
			return target{}, 0, &socksError{socksRepFailure}
		}
	}
	t.port = port
	return t, n, nil
}

// TLS constants.
const (
	tlsRecordHandshake   = 0x16
	tlsClientHello       = 0x01
	tlsExtServerName     = 0x0000
	tlsServerNameHost    = 0x00
	tlsRecordHeaderLen   = 5
	tlsMaxRecordPayload  = 1<<14 + 256
	tlsHandshakeHeadSize = 4
)

// parseClientHelloSNI returns the server name of the TLS ClientHello at
// the start of b, which may span several handshake records (at most
// MaxClientHelloSize bytes in all). It returns errNeedMore while the
// ClientHello is incomplete, and errBadRequest for anything else than a
// well-formed ClientHello with exactly one host_name in server_name.
func parseClientHelloSNI(b []byte) (string, error) {
	if len(b) > MaxClientHelloSize {
		b = b[:MaxClientHelloSize]
	}
	// Reassemble the handshake message from the records.
	var msg []byte
	need := -1 // total handshake message length, once known
	for off := 0; ; {
		if need >= 0 && len(msg) >= need {
			break
		}
		if len(b)-off < tlsRecordHeaderLen {
			if len(b) >= MaxClientHelloSize {
				return "", errBadRequest
			}
			if len(b) > off && b[off] != tlsRecordHandshake {
				return "", errBadRequest
			}
			return "", errNeedMore
		}
		h := b[off : off+tlsRecordHeaderLen]
		if h[0] != tlsRecordHandshake || h[1] != 0x03 {
			return "", errBadRequest
		}
		rl := int(binary.BigEndian.Uint16(h[3:5]))
		if rl == 0 || rl > tlsMaxRecordPayload {
			return "", errBadRequest
		}
		if len(b)-off-tlsRecordHeaderLen < rl {
			if off+tlsRecordHeaderLen+rl > MaxClientHelloSize {
				return "", errBadRequest
			}
			return "", errNeedMore
		}
		msg = append(msg, b[off+tlsRecordHeaderLen:off+tlsRecordHeaderLen+rl]...)
		off += tlsRecordHeaderLen + rl
		if need < 0 && len(msg) >= tlsHandshakeHeadSize {
			if msg[0] != tlsClientHello {
				return "", errBadRequest
			}
			need = tlsHandshakeHeadSize + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if need > MaxClientHelloSize {
				return "", errBadRequest
			}
		}
	}
	if len(msg) != need {
		// Another message follows in the same record: not a lone
		// ClientHello as a client's first flight must be.
		return "", errBadRequest
	}
	return sniFromClientHelloBody(msg[tlsHandshakeHeadSize:])
}

// reader is a bounds-checked cursor.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) bytes(n int) []byte {
	if !r.ok || n < 0 || len(r.b) < n {
		r.ok = false
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	v := r.bytes(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (r *reader) u16() int {
	v := r.bytes(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

// vec reads a vector with an n-byte length prefix.
func (r *reader) vec(n int) reader {
	var l int
	switch n {
	case 1:
		l = r.u8()
	case 2:
		l = r.u16()
	}
	v := r.bytes(l)
	return reader{b: v, ok: r.ok}
}

func sniFromClientHelloBody(body []byte) (string, error) {
	r := reader{b: body, ok: true}
	if ver := r.u16(); ver < 0x0301 || ver > 0x0304 {
		// The legacy_version of a ClientHello is 0x0303 (TLS 1.2)
		// for TLS 1.3; 1.0-1.2 are accepted, SSL 3.0 is not.
		return "", errBadRequest
	}
	r.bytes(32) // random
	if sid := r.vec(1); len(sid.b) > 32 {
		return "", errBadRequest
	}
	if cs := r.vec(2); len(cs.b) < 2 || len(cs.b)%2 != 0 {
		return "", errBadRequest
	}
	if cm := r.vec(1); len(cm.b) < 1 {
		return "", errBadRequest
	}
	if !r.ok {
		return "", errBadRequest
	}
	if len(r.b) == 0 {
		return "", errBadRequest // no extensions: no SNI
	}
	exts := r.vec(2)
	if !r.ok || len(r.b) != 0 {
		return "", errBadRequest
	}
	var name string
	found := false
	seen := map[int]bool{}
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.vec(2)
		if !exts.ok {
			return "", errBadRequest
		}
		if seen[typ] {
			return "", errBadRequest // duplicate extension
		}
		seen[typ] = true
		if typ != tlsExtServerName {
			continue
		}
		list := data.vec(2)
		if !data.ok || len(data.b) != 0 {
			return "", errBadRequest
		}
		for len(list.b) > 0 {
			nt := list.u8()
			n := list.vec(2)
			if !list.ok {
				return "", errBadRequest
			}
			if nt != tlsServerNameHost {
				continue
			}
			if found {
				return "", errBadRequest // two host names
			}
			found = true
			name = string(n.b)
		}
	}
	if !found {
		return "", errBadRequest
	}
	t, err := normalizeHost(name)
	if err != nil || t.isIP {
		// RFC 6066: "Literal IPv4 and IPv6 addresses are not
		// permitted in HostName".
		return "", errBadRequest
	}
	return t.host, nil
}
