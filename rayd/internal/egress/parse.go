package egress

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Size limits of the parsers.
const (
	// MaxHeadSize bounds an HTTP request head (request line and
	// headers, including the final empty line).
	MaxHeadSize = 16 << 10
	// MaxClientHelloSize bounds the TLS records read to find a
	// ClientHello (record headers included).
	MaxClientHelloSize = 16 << 10
	// MaxNameLen is the longest host name accepted (RFC 1035, without
	// the trailing dot).
	MaxNameLen  = 253
	maxLabelLen = 63
	maxHeaders  = 100
)

// errNeedMore is returned by the incremental parsers when the input is a
// valid prefix that is not yet complete.
var errNeedMore = errors.New("egress: need more input")

// errBadRequest is the error of every malformed input. It carries no
// detail on purpose: the input comes from the sandbox and may hold
// anything, and error strings end up in logs.
var errBadRequest = errors.New("egress: bad request")

// target is what a client asked to reach.
type target struct {
	// host is the normalized host name (lowercase, no trailing dot), or
	// the canonical string form of addr when isIP.
	host string
	// isIP reports that the client gave an IP literal, kept in addr.
	isIP bool
	addr netip.Addr
	port uint16
}

// normalizeHost validates a host name or IP literal and returns the
// target form of it (without port). Names are lowercased, one trailing
// dot is dropped, and only letters, digits, '-' and '_' are accepted in
// labels of 1-63 bytes, at most 253 bytes in all. IPv6 literals must be
// given without brackets and without a zone.
func normalizeHost(s string) (target, error) {
	if s == "" || len(s) > MaxNameLen+1 {
		return target{}, errBadRequest
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return target{}, errBadRequest
		}
		return target{host: a.String(), isIP: true, addr: a}, nil
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > MaxNameLen {
		return target{}, errBadRequest
	}
	var b strings.Builder
	b.Grow(len(s))
	label := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if label == 0 {
				return target{}, errBadRequest
			}
			label = -1
		default:
			return target{}, errBadRequest
		}
		label++
		if label > maxLabelLen {
			return target{}, errBadRequest
		}
		b.WriteByte(c)
	}
	// A last label of digits only is not a host name but a numeric
	// address form ("127.1", "2130706433", "1.2.3.4.") that some
	// resolvers would turn into an address.
	last := s[strings.LastIndexByte(s, '.')+1:]
	if strings.Trim(last, "0123456789") == "" {
		return target{}, errBadRequest
	}
	return target{host: b.String()}, nil
}

// parsePort parses a decimal port 1-65535 (no sign, no leading zeros
// beyond a length of 5 digits).
func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

// parseAuthority parses host[:port] or [v6][:port]. defPort is used when
// the port is absent; 0 means the port is required.
func parseAuthority(s string, defPort uint16) (target, error) {
	if s == "" {
		return target{}, errBadRequest
	}
	var host, port string
	hasPort := false
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return target{}, errBadRequest
		}
		host = s[1:end]
		rest := s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return target{}, errBadRequest
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return target{}, errBadRequest
		}
	} else {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			host, port, hasPort = s[:i], s[i+1:], true
		} else {
			host = s
		}
		if strings.IndexByte(host, ':') >= 0 {
			// An unbracketed IPv6 literal is ambiguous.
			return target{}, errBadRequest
		}
	}
	t, err := normalizeHost(host)
	if err != nil {
		return target{}, err
	}
	if hasPort {
		p, ok := parsePort(port)
		if !ok {
			return target{}, errBadRequest
		}
		t.port = p
	} else {
		if defPort == 0 {
			return target{}, errBadRequest
		}
		t.port = defPort
	}
	return t, nil
}

// header is one request header as it appeared on the wire.
type header struct {
	name  string // as sent
	value string // without surrounding whitespace
}

// requestHead is a strictly parsed HTTP/1.x request head.
type requestHead struct {
	method  string
	target  string
	proto   string // "HTTP/1.0" or "HTTP/1.1"
	headers []header
	size    int // bytes of the head, final CRLF CRLF included
}

// get returns the values of the header named name (case-insensitive).
func (h *requestHead) get(name string) []string {
	var vs []string
	for _, hd := range h.headers {
		if strings.EqualFold(hd.name, name) {
			vs = append(vs, hd.value)
		}
	}
	return vs
}

func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parseRequestHead parses an HTTP/1.x request head from the start of b.
// It returns errNeedMore while b holds a valid prefix shorter than
// MaxHeadSize without the end of the head. Lines must end in CRLF; the
// method is an upper-case token; the target is visible ASCII; header
// names are tokens; values hold no controls but HTAB; obsolete line
// folding is refused.
func parseRequestHead(b []byte) (*requestHead, error) {
	if len(b) > MaxHeadSize {
		b = b[:MaxHeadSize]
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= MaxHeadSize {
			return nil, errBadRequest
		}
		// Fail early on a prefix that can never become valid.
		if err := checkHeadPrefix(b); err != nil {
			return nil, err
		}
		return nil, errNeedMore
	}
	h := &requestHead{size: end + 4}
	lines := strings.Split(string(b[:end]), "\r\n")
	// Request line.
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 {
		return nil, errBadRequest
	}
	h.method, h.target, h.proto = parts[0], parts[1], parts[2]
	if h.method == "" || len(h.method) > 32 {
		return nil, errBadRequest
	}
	for i := 0; i < len(h.method); i++ {
		if c := h.method[i]; c < 'A' || c > 'Z' {
			return nil, errBadRequest
		}
	}
	if h.target == "" {
		return nil, errBadRequest
	}
	for i := 0; i < len(h.target); i++ {
		if c := h.target[i]; c <= 0x20 || c >= 0x7f {
			return nil, errBadRequest
		}
	}
	if h.proto != "HTTP/1.1" && h.proto != "HTTP/1.0" {
		return nil, errBadRequest
	}
	if len(lines)-1 > maxHeaders {
		return nil, errBadRequest
	}
	for _, l := range lines[1:] {
		colon := strings.IndexByte(l, ':')
		if colon <= 0 {
			return nil, errBadRequest
		}
		name := l[:colon]
		for i := 0; i < len(name); i++ {
			if !isTokenChar(name[i]) {
				return nil, errBadRequest
			}
		}
		value := l[colon+1:]
		for i := 0; i < len(value); i++ {
			if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return nil, errBadRequest
			}
		}
		h.headers = append(h.headers, header{name: name, value: strings.Trim(value, " \t")})
	}
	return h, nil
}

// checkHeadPrefix refuses early an incomplete head whose bytes can never
// form a valid head: a control byte other than CR, LF and HTAB, or a
// bare LF.
func checkHeadPrefix(b []byte) error {
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			return errBadRequest
		}
		if (c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f {
			return errBadRequest
		}
	}
	return nil
}

// parseConnect parses an HTTP CONNECT request head: the request line
// must be "CONNECT host:port HTTP/1.x" with an explicit port. The
// headers are parsed strictly and otherwise ignored.
func parseConnect(b []byte) (target, int, error) {
	h, err := parseRequestHead(b)
	if err != nil {
		return target{}, 0, err
	}
	if h.method != "CONNECT" {
		return target{}, 0, errBadRequest
	}
	t, err := parseAuthority(h.target, 0)
	if err != nil {
		return target{}, 0, err
	}
	return t, h.size, nil
}

// absoluteURI is a parsed absolute-form http:// request target.
type absoluteURI struct {
	t         target
	authority string // as written in the URL, for the Host header
	path      string // origin-form: path and query, never empty
}

// errHTTPS reports an https:// absolute-form target, which a proxy
// cannot serve without terminating TLS.
var errHTTPS = errors.New("egress: https absolute form")

// parseAbsoluteURI parses an absolute-form request target
// "http://host[:port][/path][?query]". User information, fragments,
// non-http schemes and https are refused.
func parseAbsoluteURI(s string) (absoluteURI, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f {
			return absoluteURI{}, errBadRequest
		}
	}
	i := strings.Index(s, "://")
	if i < 0 {
		return absoluteURI{}, errBadRequest
	}
	switch strings.ToLower(s[:i]) {
	case "http":
	case "https":
		return absoluteURI{}, errHTTPS
	default:
		return absoluteURI{}, errBadRequest
	}
	rest := s[i+3:]
	if strings.ContainsAny(rest, "#\\") {
		return absoluteURI{}, errBadRequest
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, path := rest[:end], rest[end:]
	if strings.IndexByte(auth, '@') >= 0 || strings.IndexByte(auth, '%') >= 0 {
		return absoluteURI{}, errBadRequest
	}
	t, err := parseAuthority(auth, 80)
	if err != nil {
		return absoluteURI{}, err
	}
	switch {
	case path == "":
		path = "/"
	case path[0] == '?':
		path = "/" + path
	}
	return absoluteURI{t: t, authority: auth, path: path}, nil
}

// parseAbsoluteRequest parses an absolute-form HTTP request head (any
// method but CONNECT).
func parseAbsoluteRequest(b []byte) (*requestHead, absoluteURI, error) {
	h, err := parseRequestHead(b)
	if err != nil {
		return nil, absoluteURI{}, err
	}
	if h.method == "CONNECT" {
		return nil, absoluteURI{}, errBadRequest
	}
	if !strings.Contains(h.target, "://") {
		// Origin-form (or asterisk-form) sent to the proxy itself.
		return nil, absoluteURI{}, errBadRequest
	}
	u, err := parseAbsoluteURI(h.target)
	if err != nil {
		return nil, absoluteURI{}, err
	}
	return h, u, nil
}

// hostOfTransparentHTTP returns the name in the Host header of a request
// that was redirected to the proxy. There must be exactly one Host
// header, the target must be origin-form (or "*" for OPTIONS), and
// CONNECT is refused: the request is passed on unchanged, so the name
// checked must be the only name the origin can see.
func hostOfTransparentHTTP(b []byte) (target, int, error) {
	h, err := parseRequestHead(b)
	if err != nil {
		return target{}, 0, err
	}
	if h.method == "CONNECT" {
		return target{}, 0, errBadRequest
	}
	if h.target[0] != '/' && !(h.target == "*" && h.method == "OPTIONS") {
		return target{}, 0, errBadRequest
	}
	hosts := h.get("Host")
	if len(hosts) != 1 {
		return target{}, 0, errBadRequest
	}
	// The port in the Host header is ignored: the original destination
	// port is what is checked and dialed.
	t, err := parseAuthority(hosts[0], 1)
	if err != nil {
		return target{}, 0, err
	}
	t.port = 0
	return t, h.size, nil
}
