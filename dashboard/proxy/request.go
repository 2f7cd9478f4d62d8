package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrBadRequest reports a request the proxy refuses to forward because
// its syntax or framing is not strict HTTP/1.1 (answered 400, or 431
// and 413 for the header and body bounds). Every error the reader
// returns wraps it or ErrTooLarge / ErrHeaderTooLarge.
var (
	ErrBadRequest     = errors.New("proxy: bad request")
	ErrHeaderTooLarge = fmt.Errorf("%w: header block too large", ErrBadRequest)
	ErrTooLarge       = fmt.Errorf("%w: body too large", ErrBadRequest)
)

// Limits bound what ReadRequest accepts.
type Limits struct {
	// MaxHeaderBytes bounds the request line plus the header block
	// (and, separately, a chunked body's trailer section).
	MaxHeaderBytes int
	// MaxHeaders bounds the number of header fields.
	MaxHeaders int
	// MaxBodyBytes bounds a Content-Length.
	MaxBodyBytes int64
	// MaxChunkedBytes bounds the sum of a chunked body's chunks: such a
	// body is read whole and checked before anything is sent upstream.
	MaxChunkedBytes int64
}

// DefaultLimits are the proxy's bounds: 32 KiB of header block in at
// most 100 fields, a body of at most 1 GiB with a Content-Length, 16 MiB
// chunked.
var DefaultLimits = Limits{MaxHeaderBytes: 32 << 10, MaxHeaders: 100, MaxBodyBytes: 1 << 30, MaxChunkedBytes: 16 << 20}

// Field is one header field as the client sent it (name as written,
// value with its OWS trimmed).
type Field struct{ Name, Value string }

// Request is the head of one client request, checked.
type Request struct {
	Method string
	// Target is the origin-form request target (/path?query).
	Target string
	// Proto is "HTTP/1.1" or "HTTP/1.0".
	Proto  string
	Fields []Field
	// ContentLength is the body's length; -1 when chunked.
	ContentLength int64
	// Chunked: the body is Transfer-Encoding: chunked.
	Chunked bool
}

// Values are the values of the fields named name (case-insensitive).
func (r *Request) Values(name string) []string {
	var out []string
	for _, f := range r.Fields {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, a...)...)
}

// isTchar: RFC 9110 token characters.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// readLine reads one line ending in CRLF, without it, spending from
// *budget. A bare LF, a CR not followed by LF, or a NUL is an error.
func readLine(br *bufio.Reader, budget *int, tooLarge error) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(b) > 0 {
				return "", bad("truncated line")
			}
			return "", err
		}
		*budget--
		if *budget < 0 {
			return "", tooLarge
		}
		switch c {
		case '\n':
			return "", bad("bare LF")
		case '\r':
			n, err := br.ReadByte()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return "", bad("truncated line")
				}
				return "", err
			}
			if n != '\n' {
				return "", bad("bare CR")
			}
			*budget--
			if *budget < 0 {
				return "", tooLarge
			}
			return string(b), nil
		case 0:
			return "", bad("NUL")
		}
		b = append(b, c)
	}
}

// validValue: field-value characters (VCHAR, obs-text, SP, HT).
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// trimOWS trims space and tab only.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}

// parseField checks one field line.
func parseField(line string) (Field, error) {
	if line[0] == ' ' || line[0] == '\t' {
		return Field{}, bad("obs-fold")
	}
	name, value, ok := strings.Cut(line, ":")
	if !ok {
		return Field{}, bad("field without colon")
	}
	if !isToken(name) {
		return Field{}, bad("field name is not a token")
	}
	value = trimOWS(value)
	if !validValue(value) {
		return Field{}, bad("control character in a field value")
	}
	return Field{Name: name, Value: value}, nil
}

// ReadRequest reads and checks the head of one request from br: the
// request line (a token method other than CONNECT, an origin-form target,
// HTTP/1.1 or HTTP/1.0), field lines ending in CRLF (tchar names, values
// without CR, LF, NUL or other controls, no obs-fold), exactly one Host,
// and a body framed by at most one of a single digits-only Content-Length
// or a single Transfer-Encoding: chunked. It reads nothing past the
// header block. io.EOF means the client sent nothing.
func ReadRequest(br *bufio.Reader, l Limits) (*Request, error) {
	budget := l.MaxHeaderBytes
	line, err := readLine(br, &budget, ErrHeaderTooLarge)
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !isToken(method) {
		return nil, bad("malformed request line")
	}
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return nil, bad("unsupported protocol version")
	}
	if method == "CONNECT" {
		return nil, bad("CONNECT is not forwarded")
	}
	if !validTarget(target) {
		return nil, bad("request target is not origin-form")
	}
	r := &Request{Method: method, Target: target, Proto: proto}
	for {
		line, err := readLine(br, &budget, ErrHeaderTooLarge)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, bad("truncated header block")
			}
			return nil, err
		}
		if line == "" {
			break
		}
		f, err := parseField(line)
		if err != nil {
			return nil, err
		}
		if len(r.Fields) >= l.MaxHeaders {
			return nil, fmt.Errorf("%w: too many fields", ErrHeaderTooLarge)
		}
		r.Fields = append(r.Fields, f)
	}
	if err := r.framing(l); err != nil {
		return nil, err
	}
	return r, nil
}

// validTarget: origin-form, visible ASCII only, no fragment.
func validTarget(t string) bool {
	if t == "" || t[0] != '/' {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= 0x20 || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// framing checks Host and the body's delimitation.
func (r *Request) framing(l Limits) error {
	if len(r.Values("Host")) != 1 {
		return bad("want exactly one Host")
	}
	cl, te := r.Values("Content-Length"), r.Values("Transfer-Encoding")
	switch {
	case len(cl) > 0 && len(te) > 0:
		return bad("both Content-Length and Transfer-Encoding")
	case len(cl) > 1:
		return bad("several Content-Length")
	case len(te) > 1:
		return bad("several Transfer-Encoding")
	case len(te) == 1:
		if !strings.EqualFold(te[0], "chunked") || r.Proto != "HTTP/1.1" {
			return bad("Transfer-Encoding other than chunked")
		}
		r.Chunked, r.ContentLength = true, -1
	case len(cl) == 1:
		v := cl[0]
		if v == "" || len(v) > 19 {
			return bad("invalid Content-Length")
		}
		for i := 0; i < len(v); i++ {
			if v[i] < '0' || v[i] > '9' {
				return bad("invalid Content-Length")
			}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad("invalid Content-Length")
		}
		if n > l.MaxBodyBytes {
			return ErrTooLarge
		}
		r.ContentLength = n
	}
	return nil
}

// Body returns the request's body as read from br: exactly
// ContentLength bytes, or the decoded chunks of a chunked body (at most
// MaxChunkedBytes; its trailer section checked and dropped). It reads
// nothing past the body.
func (r *Request) Body(br *bufio.Reader, l Limits) io.Reader {
	if r.Chunked {
		return &chunkedReader{br: br, l: l}
	}
	return &exactReader{r: br, n: r.ContentLength}
}

// exactReader reads exactly n bytes; an early EOF is an error.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= int64(n)
	if errors.Is(err, io.EOF) {
		if e.n > 0 {
			return n, bad("body shorter than its Content-Length")
		}
		err = nil
	}
	return n, err
}

// chunkedReader decodes a chunked body under a strict grammar:
// chunk-size is 1 to 16 hex digits, extensions are ;token[=token], each
// line ends in CRLF, chunk data is followed by CRLF.
type chunkedReader struct {
	br    *bufio.Reader
	l     Limits
	left  int64 // of the current chunk
	total int64
	done  bool
	err   error
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	for c.left == 0 {
		if err := c.next(); err != nil {
			c.err = err
			return 0, err
		}
		if c.done {
			return 0, io.EOF
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		err = c.crlf()
	}
	if errors.Is(err, io.EOF) {
		err = bad("truncated chunk")
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

func (c *chunkedReader) crlf() error {
	a, err := c.br.ReadByte()
	if err != nil {
		return err
	}
	b, err := c.br.ReadByte()
	if err != nil {
		return err
	}
	if a != '\r' || b != '\n' {
		return bad("chunk data not followed by CRLF")
	}
	return nil
}

// next reads a chunk-size line (and, after the last chunk, the trailer
// section).
func (c *chunkedReader) next() error {
	budget := 1024
	line, err := readLine(c.br, &budget, bad("chunk-size line too long"))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return bad("truncated chunked body")
		}
		return err
	}
	size, ext, _ := strings.Cut(line, ";")
	if size == "" || len(size) > 16 {
		return bad("invalid chunk size")
	}
	var n int64
	for i := 0; i < len(size); i++ {
		d := size[i]
		var v byte
		switch {
		case '0' <= d && d <= '9':
			v = d - '0'
		case 'a' <= d && d <= 'f':
			v = d - 'a' + 10
		case 'A' <= d && d <= 'F':
			v = d - 'A' + 10
		default:
			return bad("invalid chunk size")
		}
		if n > (c.l.MaxChunkedBytes+15)/16 {
			return ErrTooLarge
		}
		n = n*16 + int64(v)
	}
	if line != size {
		for _, e := range strings.Split(ext, ";") {
			name, val, hasVal := strings.Cut(e, "=")
			if !isToken(name) || hasVal && !isToken(val) {
				return bad("invalid chunk extension")
			}
		}
	}
	if n > c.l.MaxChunkedBytes-c.total {
		return ErrTooLarge
	}
	c.total += n
	if n > 0 {
		c.left = n
		return nil
	}
	// Last chunk: the trailer section, checked as fields, dropped.
	tb := c.l.MaxHeaderBytes
	for fields := 0; ; fields++ {
		line, err := readLine(c.br, &tb, ErrHeaderTooLarge)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return bad("truncated trailer section")
			}
			return err
		}
		if line == "" {
			c.done = true
			return nil
		}
		if fields >= c.l.MaxHeaders {
			return fmt.Errorf("%w: too many trailer fields", ErrHeaderTooLarge)
		}
		if _, err := parseField(line); err != nil {
			return err
		}
	}
}
