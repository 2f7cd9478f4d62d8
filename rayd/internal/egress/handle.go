package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/proxy"
)

// inbuf accumulates the bytes read from a client before its tunnel is
// established; whatever is left in buf once the request is parsed is
// replayed to the origin.
type inbuf struct {
	c   net.Conn
	buf []byte
}

// fill reads more bytes, keeping len(buf) <= limit.
func (in *inbuf) fill(limit int) error {
	room := limit - len(in.buf)
	if room <= 0 {
		return errBadRequest
	}
	var tmp [4096]byte
	n, err := in.c.Read(tmp[:min(room, len(tmp))])
	in.buf = append(in.buf, tmp[:n]...)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func (in *inbuf) consume(n int) { in.buf = in.buf[n:] }

// readUntil calls parse on the buffered bytes, reading more while it
// returns errNeedMore.
func readUntil[T any](in *inbuf, limit int, parse func([]byte) (T, error)) (T, error) {
	for {
		v, err := parse(in.buf)
		if !errors.Is(err, errNeedMore) {
			return v, err
		}
		if err := in.fill(limit); err != nil {
			var zero T
			return zero, err
		}
	}
}

// handle serves one client connection.
func (p *Proxy) handle(c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.closeAll()
	}()
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.HandshakeTimeout)
	defer cancel()
	c.client.SetDeadline(time.Now().Add(p.opts.HandshakeTimeout))
	in := &inbuf{c: c.client}
	if dst, ok := p.redirected(c.client); ok {
		p.serveTransparent(ctx, c, in, dst)
		return
	}
	if err := in.fill(1); err != nil {
		p.refuse("none", ReasonBadRequest)
		return
	}
	switch b := in.buf[0]; {
	case b == socksVersion:
		p.serveSOCKS(ctx, c, in)
	case b >= 'A' && b <= 'Z':
		p.serveHTTP(ctx, c, in)
	default:
		p.refuse("unknown", ReasonBadRequest)
	}
}

// redirected reports whether the client's connection was redirected to
// the proxy, and its original destination.
func (p *Proxy) redirected(c net.Conn) (netip.AddrPort, bool) {
	dst, err := p.opts.OriginalDst(c)
	if err != nil || !dst.IsValid() {
		return netip.AddrPort{}, false
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok {
		own := la.AddrPort()
		if netip.AddrPortFrom(own.Addr().Unmap(), own.Port()) == dst {
			return netip.AddrPort{}, false
		}
	}
	return dst, true
}

// refuse counts and logs a refusal (kind and reason class only).
func (p *Proxy) refuse(kind, reason string) {
	p.mu.Lock()
	p.refused[reason]++
	p.mu.Unlock()
	p.log.Debug("egress: request refused", "kind", kind, "reason", reason)
}

// errUpstream is the only error the upstream dial reports: the SOCKS5
// library's errors may name the upstream or the destination.
var errUpstream = errors.New("egress: upstream proxy dial failed")

// resolveGuarded resolves host (unless addrs, an IP literal's address,
// are given) and puts every address through the guard: the addresses,
// unmapped, in order, or ok false when any of them is blocked (nothing of
// a name that resolves to one blocked address is dialed), or the resolve
// error (also for an empty answer).
func (p *Proxy) resolveGuarded(ctx context.Context, host string, addrs []netip.Addr) (_ []netip.Addr, ok bool, err error) {
	if addrs == nil {
		if addrs, err = p.opts.Resolve(ctx, host); err == nil && len(addrs) == 0 {
			err = errNoAddress
		}
		if err != nil {
			return nil, false, err
		}
	}
	local := p.opts.LocalAddrs()
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if blockedAddress(a, local) {
			return nil, false, nil
		}
		out = append(out, a)
	}
	return out, true, nil
}

// errNoAddress: a name resolved to no address.
var errNoAddress = errors.New("egress: no address")

// connect checks t against the policy, resolves, guards and dials it.
// It returns the origin connection or a reason class.
func (p *Proxy) connect(ctx context.Context, t target) (net.Conn, string) {
	pol, up := p.current()
	if !allows(pol, t) {
		return nil, ReasonNotAllowed
	}
	var addrs []netip.Addr
	if t.isIP {
		addrs = []netip.Addr{t.addr}
	}
	guarded, ok, err := p.resolveGuarded(ctx, t.host, addrs)
	switch {
	case err != nil:
		return nil, ReasonResolveFailed
	case !ok:
		return nil, ReasonBlockedAddress
	}
	// The upstream's own address goes through the same guard, resolved
	// afresh for every tunnel (a name that now resolves to loopback is
	// refused, and nothing is dialed).
	var upAddrs []netip.AddrPort
	if up != nil {
		var reason string
		if upAddrs, reason = p.guardUpstream(ctx, up.Address); reason != "" {
			if reason == ReasonUpstreamBlocked {
				p.warnUpstreamBlocked()
			}
			return nil, reason
		}
	}
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	for _, a := range guarded {
		dst := netip.AddrPortFrom(a, t.port).String()
		var oc net.Conn
		var err error
		if up != nil {
			oc, err = p.dialUpstream(dctx, up, upAddrs, dst)
		} else {
			oc, err = p.opts.Dial(dctx, "tcp", dst)
		}
		if err == nil {
			return oc, ""
		}
		if dctx.Err() != nil {
			break
		}
	}
	return nil, ReasonDialFailed
}

// warnUpstreamBlocked logs, once per SetPolicy (the sandbox's code could
// otherwise fill the log), that the upstream is refused by the guard.
func (p *Proxy) warnUpstreamBlocked() {
	p.mu.Lock()
	warn := !p.upWarned
	p.upWarned = true
	p.mu.Unlock()
	if warn {
		p.log.Warn("egress: the operator's upstream proxy is a localhost name or resolves to a blocked address; it is never dialed")
	}
}

// dialerFunc adapts a dial function to proxy.Dialer and
// proxy.ContextDialer.
type dialerFunc func(ctx context.Context, network, address string) (net.Conn, error)

func (f dialerFunc) Dial(network, address string) (net.Conn, error) {
	return f(context.Background(), network, address)
}

func (f dialerFunc) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return f(ctx, network, address)
}

// dialUpstream opens a tunnel to dst (a guarded IP:port) through the
// upstream SOCKS5 proxy, reached at the first of upAddrs (its guarded
// addresses, from guardUpstream) that answers, and returns the raw
// connection to the upstream (after the SOCKS5 handshake the wrapper only
// passes bytes through, and the raw connection supports half-close). The
// upstream's name is never handed to the dialer.
func (p *Proxy) dialUpstream(ctx context.Context, up *Upstream, upAddrs []netip.AddrPort, dst string) (net.Conn, error) {
	var raw net.Conn
	fwd := dialerFunc(func(ctx context.Context, network, _ string) (net.Conn, error) {
		for _, a := range upAddrs {
			c, err := p.opts.Dial(ctx, network, a.String())
			if err == nil {
				raw = c
				return c, nil
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errUpstream
	})
	var auth *proxy.Auth
	if up.Username != "" || up.Password != "" {
		auth = &proxy.Auth{User: up.Username, Password: up.Password}
	}
	d, err := proxy.SOCKS5("tcp", up.Address, auth, fwd)
	if err != nil {
		return nil, errUpstream
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		return nil, errUpstream
	}
	c, err := cd.DialContext(ctx, "tcp", dst)
	if err != nil {
		if raw != nil {
			raw.Close()
		}
		return nil, errUpstream
	}
	if raw == nil {
		return c, nil
	}
	return raw, nil
}

// establish registers the tunnel, re-checking t against the policy in
// force now (SetPolicy may have run since connect).
func (p *Proxy) establish(c *proxyConn, t target, origin net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !allows(p.policy, t) {
		return false
	}
	c.origin, c.t, c.tunnel = origin, t, true
	p.tunneled++
	return true
}

// open runs connect and establish; on failure it closes the origin and
// returns the reason.
func (p *Proxy) open(ctx context.Context, c *proxyConn, t target) (net.Conn, string) {
	oc, reason := p.connect(ctx, t)
	if reason != "" {
		return nil, reason
	}
	if !p.establish(c, t, oc) {
		oc.Close()
		return nil, ReasonNotAllowed
	}
	return oc, ""
}

type closeWriter interface{ CloseWrite() error }

func closeWrite(c net.Conn) {
	if cw, ok := c.(closeWriter); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// splice copies both ways: first the replayed bytes, then client to
// origin, and origin to client, half-closing each direction at EOF. It
// returns when both directions are done or either fails.
func splice(client net.Conn, replay []byte, origin net.Conn) {
	client.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		var err error
		if len(replay) > 0 {
			_, err = origin.Write(replay)
		}
		if err == nil {
			_, err = io.Copy(origin, client)
		}
		if err != nil {
			client.Close()
			origin.Close()
		} else {
			closeWrite(origin)
		}
		done <- struct{}{}
	}()
	go func() {
		_, err := io.Copy(client, origin)
		if err != nil {
			client.Close()
			origin.Close()
		} else {
			closeWrite(client)
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// httpRefusal writes the HTTP answer to a refusal and lingers briefly so
// that unread request bytes do not turn the close into a reset that
// would discard the answer.
func httpRefusal(c net.Conn, reason string) {
	status := "403 Forbidden"
	switch reason {
	case ReasonBadRequest:
		status = "400 Bad Request"
	case ReasonResolveFailed, ReasonDialFailed, ReasonUpstreamBlocked:
		status = "502 Bad Gateway"
	}
	body := reason + "\n"
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "HTTP/1.1 "+status+"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
	lingerClose(c)
}

func lingerClose(c net.Conn) {
	if cw, ok := c.(closeWriter); ok {
		cw.CloseWrite()
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		io.CopyN(io.Discard, c, 64<<10)
	}
	c.Close()
}

// serveTransparent serves a redirected connection.
func (p *Proxy) serveTransparent(ctx context.Context, c *proxyConn, in *inbuf, dst netip.AddrPort) {
	kind := "transparent_http"
	if dst.Port() == 0 {
		p.refuse(kind, ReasonBadRequest)
		return
	}
	if err := in.fill(1); err != nil {
		p.refuse(kind, ReasonBadRequest)
		return
	}
	var t target
	var err error
	isTLS := dst.Port() == 443 || in.buf[0] == tlsRecordHandshake
	if isTLS {
		kind = "transparent_tls"
		var name string
		name, err = readUntil(in, MaxClientHelloSize, parseClientHelloSNI)
		t = target{host: name}
	} else {
		t, err = readUntil(in, MaxHeadSize, func(b []byte) (target, error) {
			t, _, err := hostOfTransparentHTTP(b)
			return t, err
		})
	}
	answer := func(reason string) {
		p.refuse(kind, reason)
		if !isTLS {
			httpRefusal(c.client, reason)
		}
	}
	if err != nil {
		answer(ReasonBadRequest)
		return
	}
	t.port = dst.Port()
	if isTLS {
		if ic := p.interceptorFor(t, dst.Addr()); ic != nil {
			p.intercept(c, ic, in.buf, t)
			return
		}
	} else if p.plainCarriesPlaceholder(in.buf, t.host, t.port) {
		answer(ReasonPlaceholder)
		return
	}
	if pol, _ := p.current(); !allows(pol, t) && allows(pol, target{isIP: true, addr: dst.Addr(), port: t.port}) {
		// The name is not allowed but the destination address is, as
		// it would be directly: the connection was redirected only
		// because its port is one the interceptor watches.
		t = target{isIP: true, addr: dst.Addr(), port: t.port}
	}
	oc, reason := p.open(ctx, c, t)
	if reason != "" {
		answer(reason)
		return
	}
	client := c.client
	if !isTLS {
		// Plain HTTP keeps being watched after the first head: a later
		// request of the connection carrying a placeholder cuts it.
		client = &placeholderGuard{Conn: c.client, p: p, host: t.host, port: t.port}
	}
	splice(client, in.buf, oc)
}

// placeholderGuard is a plain-HTTP client connection whose bytes are
// checked for secret placeholders as they are read (with an overlap, so
// that one split across two reads is caught): the first hit cuts the
// connection before those bytes are forwarded.
type placeholderGuard struct {
	net.Conn
	p    *Proxy
	host string // where the connection goes, for the audit
	port uint16
	tail []byte // the last guardOverlap bytes read
	seam []byte // reused: tail followed by the start of the next read
}

// guardOverlap covers the longest placeholder and an Authorization line's
// Basic credentials around it.
const guardOverlap = 1024

func (g *placeholderGuard) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	if n > 0 {
		// The read itself, and the seam with the previous one.
		g.seam = append(append(g.seam[:0], g.tail...), b[:min(n, guardOverlap)]...)
		if g.p.plainCarriesPlaceholder(b[:n], g.host, g.port) || g.p.plainCarriesPlaceholder(g.seam, g.host, g.port) {
			g.p.refuse("transparent_http", ReasonPlaceholder)
			g.Conn.Close()
			return 0, errPlaceholder
		}
		if n >= guardOverlap {
			g.tail = append(g.tail[:0], b[n-guardOverlap:n]...)
		} else {
			g.tail = append(g.tail, b[:n]...)
			g.tail = g.tail[max(0, len(g.tail)-guardOverlap):]
		}
	}
	return n, err
}

// CloseWrite half-closes the client connection, as splice expects.
func (g *placeholderGuard) CloseWrite() error {
	if cw, ok := g.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return g.Conn.Close()
}

var errPlaceholder = errors.New("egress: a placeholder in clear")

// intercept hands the client connection to the interceptor, which serves
// it for as long as it lasts (not bound by the handshake timeout).
func (p *Proxy) intercept(c *proxyConn, ic Interceptor, replay []byte, t target) {
	p.mu.Lock()
	p.intercepted++
	p.mu.Unlock()
	c.client.SetDeadline(time.Time{})
	ic.ServeIntercepted(p.ctx, c.client, append([]byte(nil), replay...), t.host, t.port)
}

// socksReply writes a SOCKS5 reply with a zero bound address.
func socksReply(c net.Conn, rep byte) error {
	_, err := c.Write([]byte{socksVersion, rep, 0x00, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

func (p *Proxy) serveSOCKS(ctx context.Context, c *proxyConn, in *inbuf) {
	const kind = "socks5"
	type greeting struct {
		n      int
		noAuth bool
	}
	g, err := readUntil(in, 2+255, func(b []byte) (greeting, error) {
		n, ok, err := parseSOCKSGreeting(b)
		return greeting{n, ok}, err
	})
	if err != nil {
		p.refuse(kind, ReasonBadRequest)
		return
	}
	in.consume(g.n)
	if !g.noAuth {
		p.refuse(kind, ReasonBadRequest)
		c.client.Write([]byte{socksVersion, socksMethodNone})
		return
	}
	if _, err := c.client.Write([]byte{socksVersion, socksMethodNoAuth}); err != nil {
		return
	}
	type request struct {
		t target
		n int
	}
	r, err := readUntil(in, len(in.buf)+4+1+255+2, func(b []byte) (request, error) {
		t, n, err := parseSOCKSRequest(b)
		return request{t, n}, err
	})
	if err != nil {
		p.refuse(kind, ReasonBadRequest)
		var se *socksError
		if errors.As(err, &se) {
			socksReply(c.client, se.rep)
		} else if errors.Is(err, errBadRequest) {
			socksReply(c.client, socksRepFailure)
		}
		return
	}
	in.consume(r.n)
	if ic := p.interceptorFor(r.t, netip.Addr{}); ic != nil {
		if socksReply(c.client, socksRepSucceeded) == nil {
			p.intercept(c, ic, in.buf, r.t)
		}
		return
	}
	oc, reason := p.open(ctx, c, r.t)
	if reason != "" {
		p.refuse(kind, reason)
		rep := byte(socksRepFailure)
		switch reason {
		case ReasonNotAllowed, ReasonBlockedAddress:
			rep = socksRepNotAllowed
		case ReasonResolveFailed:
			rep = socksRepHostUnr
		case ReasonDialFailed, ReasonUpstreamBlocked:
			rep = socksRepConnRefuse
		}
		socksReply(c.client, rep)
		return
	}
	if err := socksReply(c.client, socksRepSucceeded); err != nil {
		return
	}
	splice(c.client, in.buf, oc)
}

func (p *Proxy) serveHTTP(ctx context.Context, c *proxyConn, in *inbuf) {
	h, err := readUntil(in, MaxHeadSize, parseRequestHead)
	if err != nil {
		p.refuse("http", ReasonBadRequest)
		if errors.Is(err, errBadRequest) {
			httpRefusal(c.client, ReasonBadRequest)
		}
		return
	}
	if h.method == "CONNECT" {
		in.consume(h.size)
		p.serveConnect(ctx, c, in, h)
		return
	}
	var to target // where the request goes, for the audit ("" when not absolute)
	if u, err := parseAbsoluteURI(h.target); err == nil {
		to = u.t
	}
	if p.plainCarriesPlaceholder(in.buf[:h.size], to.host, to.port) {
		p.refuse("absolute", ReasonPlaceholder)
		httpRefusal(c.client, ReasonPlaceholder)
		return
	}
	in.consume(h.size)
	p.serveAbsolute(ctx, c, in, h)
}

// connectTarget returns the target of a parsed CONNECT head.
func connectTarget(h *requestHead) (target, error) {
	if h.method != "CONNECT" {
		return target{}, errBadRequest
	}
	return parseAuthority(h.target, 0)
}

func (p *Proxy) serveConnect(ctx context.Context, c *proxyConn, in *inbuf, h *requestHead) {
	const kind = "connect"
	t, err := connectTarget(h)
	if err != nil {
		p.refuse(kind, ReasonBadRequest)
		httpRefusal(c.client, ReasonBadRequest)
		return
	}
	if ic := p.interceptorFor(t, netip.Addr{}); ic != nil {
		if _, err := io.WriteString(c.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
			p.intercept(c, ic, in.buf, t)
		}
		return
	}
	oc, reason := p.open(ctx, c, t)
	if reason != "" {
		p.refuse(kind, reason)
		httpRefusal(c.client, reason)
		return
	}
	if _, err := io.WriteString(c.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	splice(c.client, in.buf, oc)
}

// hopByHop are the request headers never forwarded in the absolute-form
// case (RFC 9110 7.6.1, plus the Proxy-* headers meant for this proxy).
var hopByHop = map[string]bool{
	"connection":          true,
	"proxy-connection":    true,
	"keep-alive":          true,
	"proxy-authorization": true,
	"proxy-authenticate":  true,
	"te":                  true,
	"trailer":             true,
	"upgrade":             true,
	"host":                true, // rewritten
	"transfer-encoding":   true, // re-added when chunked
	"content-length":      true, // re-added when present
}

// bodyFraming is how the body of an absolute-form request is delimited.
type bodyFraming struct {
	chunked bool
	length  int64 // when !chunked; 0 = no body
}

// requestFraming checks the body framing strictly: Transfer-Encoding
// must be exactly "chunked" and excludes Content-Length; Content-Length
// values must be identical decimal numbers.
func requestFraming(h *requestHead) (bodyFraming, error) {
	te := h.get("Transfer-Encoding")
	cl := h.get("Content-Length")
	if len(te) > 0 {
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") || len(cl) > 0 || h.proto == "HTTP/1.0" {
			return bodyFraming{}, errBadRequest
		}
		return bodyFraming{chunked: true}, nil
	}
	if len(cl) == 0 {
		return bodyFraming{}, nil
	}
	for _, v := range cl[1:] {
		if v != cl[0] {
			return bodyFraming{}, errBadRequest
		}
	}
	if cl[0] == "" || len(cl[0]) > 18 || strings.Trim(cl[0], "0123456789") != "" {
		return bodyFraming{}, errBadRequest
	}
	n, err := strconv.ParseInt(cl[0], 10, 64)
	if err != nil {
		return bodyFraming{}, errBadRequest
	}
	return bodyFraming{length: n}, nil
}

// connectionTokens returns the lowercased header names listed in the
// Connection headers, which are hop-by-hop too.
func connectionTokens(h *requestHead) map[string]bool {
	m := map[string]bool{}
	for _, v := range h.get("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				m[strings.ToLower(tok)] = true
			}
		}
	}
	return m
}

// originHead builds the origin-form request head sent to the origin.
func originHead(h *requestHead, u absoluteURI, f bodyFraming) []byte {
	var b bytes.Buffer
	b.WriteString(h.method + " " + u.path + " " + h.proto + "\r\n")
	b.WriteString("Host: " + u.authority + "\r\n")
	drop := connectionTokens(h)
	for _, hd := range h.headers {
		n := strings.ToLower(hd.name)
		if hopByHop[n] || drop[n] {
			continue
		}
		b.WriteString(hd.name + ": " + hd.value + "\r\n")
	}
	switch {
	case f.chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n")
	case f.length > 0 || len(h.get("Content-Length")) > 0:
		b.WriteString("Content-Length: " + strconv.FormatInt(f.length, 10) + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	return b.Bytes()
}

func (p *Proxy) serveAbsolute(ctx context.Context, c *proxyConn, in *inbuf, h *requestHead) {
	const kind = "absolute"
	if !strings.Contains(h.target, "://") {
		// Origin-form (or asterisk-form) sent to the proxy itself.
		p.refuse(kind, ReasonBadRequest)
		httpRefusal(c.client, ReasonBadRequest)
		return
	}
	u, err := parseAbsoluteURI(h.target)
	if err == nil {
		var f bodyFraming
		if f, err = requestFraming(h); err == nil {
			p.forwardAbsolute(ctx, c, in, h, u, f)
			return
		}
	}
	p.refuse(kind, ReasonBadRequest)
	httpRefusal(c.client, ReasonBadRequest)
}

func (p *Proxy) forwardAbsolute(ctx context.Context, c *proxyConn, in *inbuf, h *requestHead, u absoluteURI, f bodyFraming) {
	const kind = "absolute"
	oc, reason := p.open(ctx, c, u.t)
	if reason != "" {
		p.refuse(kind, reason)
		httpRefusal(c.client, reason)
		return
	}
	c.client.SetDeadline(time.Time{})
	if _, err := oc.Write(originHead(h, u, f)); err != nil {
		return
	}
	// The request body, and nothing after it: one request per
	// connection, so that nothing the client sends later reaches the
	// origin unchecked.
	go func() {
		body := io.MultiReader(bytes.NewReader(in.buf), c.client)
		var err error
		switch {
		case f.chunked:
			cw := httputil.NewChunkedWriter(oc)
			_, err = io.Copy(cw, httputil.NewChunkedReader(bufio.NewReader(body)))
			if err == nil {
				if err = cw.Close(); err == nil {
					_, err = io.WriteString(oc, "\r\n")
				}
			}
		case f.length > 0:
			_, err = io.CopyN(oc, body, f.length)
		}
		if err != nil {
			c.client.Close()
			oc.Close()
		}
	}()
	io.Copy(c.client, oc)
}
