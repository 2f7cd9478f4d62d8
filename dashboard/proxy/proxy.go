// Package proxy is `rayito sandbox proxy`'s server: it listens on
// 127.0.0.1 (by default) and forwards to one port of one sandbox through
// the SDK's *rayito.Port, adding that port's headers (Host,
// x-aws-proxy-auth, x-aws-proxy-port: a token for that one port only,
// fetched per connection, so a refreshed token is used as soon as the SDK
// has it). It works against the local platform (http://<platform>) and
// AWS (https://<endpoint>) alike.
//
// A loopback port that carries the operator's credentials is reachable
// from every web page the operator's browser opens, so the server is
// strict (docs/proxy.md, and the "rayito sandbox proxy" section of the
// security model):
//
//   - port 9000 (the lifecycle hooks') and ports outside 1–65535 are
//     refused before any call; a bind address outside loopback needs
//     AllowRemote;
//   - the Host must be loopback with the local port, the bind address,
//     <id>.localhost or an allowed host, else 421; an Origin, if present,
//     one of those origins or an allowed origin, else 403
//     (dashboard/hostguard);
//   - at most MaxConnections connections at a time, then 503 and close;
//   - exactly one request is forwarded per client connection, read by a
//     strict HTTP/1.1 reader (ReadRequest): ambiguous framing, bare CR or
//     LF, obs-fold, names outside tchar are 400 and never reach the
//     sandbox; the answer carries Connection: close and nothing the
//     client sends after that request reaches the upstream;
//   - the client's x-aws-proxy-* headers, hop-by-hop headers and
//     rayito_dashboard_* cookies are not forwarded;
//   - an upgrade (WebSocket) becomes a byte tunnel only when the upstream
//     answers 101; otherwise the answer is sent and the connection closed;
//   - every read and write has a deadline; a slow client is dropped;
//   - nothing is logged: Stats holds counts by status code only.
package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/dashboard/hostguard"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Errors of New.
var (
	// ErrPort: the sandbox's port is 9000 or outside 1–65535.
	ErrPort = errors.New("proxy: port refused")
	// ErrRemote: a bind address outside loopback without AllowRemote.
	ErrRemote = errors.New("proxy: a bind address outside loopback needs AllowRemote")
	// ErrInvalid: another option is invalid.
	ErrInvalid = errors.New("proxy: invalid option")
)

// Upstream is the sandbox's port: *rayito.Port is one.
type Upstream interface {
	// Number is the sandbox's port.
	Number() int
	// URL is the base URL requests go to (http:// or https://).
	URL() string
	// Headers are the headers a request to URL needs (Host and the
	// port's auth).
	Headers(ctx context.Context) (http.Header, error)
}

// Options configure a Server; the zero value serves on a free port of
// 127.0.0.1.
type Options struct {
	// SandboxID adds <SandboxID>.localhost to the accepted hosts.
	SandboxID string
	// ListenPort is the local port; 0 picks a free one.
	ListenPort int
	// Bind is the address listened on ("" is 127.0.0.1).
	Bind string
	// AllowRemote permits a Bind outside loopback.
	AllowRemote bool
	// AllowedHosts and AllowOrigins extend the Host and Origin allowlists.
	AllowedHosts []string
	AllowOrigins []string
	// MaxConnections bounds the connections at a time (0 is 8).
	MaxConnections int
	// Limits bound a request (zero fields take DefaultLimits').
	Limits Limits
	// HeaderTimeout bounds reading a request's head (0 is 10 s): a
	// client that sends it slower is dropped.
	HeaderTimeout time.Duration
	// IdleTimeout bounds each read and write of a body or a tunnel
	// (0 is 2 min).
	IdleTimeout time.Duration
	// ResponseTimeout bounds the wait for the upstream's response head
	// (0 is 2 min).
	ResponseTimeout time.Duration
	// TunnelIdleTimeout closes an upgraded connection (WebSocket) after
	// that long without a byte in either direction (0 is 10 min).
	TunnelIdleTimeout time.Duration
}

// IsLoopback reports whether bind ("" counts as 127.0.0.1) is a loopback
// address.
func IsLoopback(bind string) bool {
	if bind == "" {
		return true
	}
	a, err := netip.ParseAddr(bind)
	return err == nil && a.Unmap().IsLoopback()
}

// CheckPort refuses port 9000 and ports outside 1–65535.
func CheckPort(port int) error {
	switch {
	case port < 1 || port > 65535:
		return fmt.Errorf("%w: %d (want 1 to 65535)", ErrPort, port)
	case port == microvmsapi.HooksPort:
		return fmt.Errorf("%w: 9000 is the platform's lifecycle hooks port", ErrPort)
	}
	return nil
}

// Stats are a server's counts: nothing else is recorded.
type Stats struct {
	// Connections accepted, and refused for MaxConnections (503).
	Connections, Busy int64
	// Forwarded requests; Tunnels among them (101).
	Forwarded, Tunnels int64
	// Status counts the answers by status code, the proxy's own and the
	// upstream's.
	Status map[int]int64
}

// Server is a running proxy.
type Server struct {
	up     Upstream
	o      Options
	guard  *hostguard.Guard
	ln     net.Listener
	slots  chan struct{}
	client *http.Client
	tr     *http.Transport

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	status map[int]int64
	closed bool

	connections, busy, forwarded, tunnels atomic.Int64
}

// New checks the options, refuses a forbidden port before any call to
// the upstream, and listens. Serve then answers.
func New(up Upstream, o Options) (*Server, error) {
	if up == nil {
		return nil, fmt.Errorf("%w: no upstream", ErrInvalid)
	}
	if err := CheckPort(up.Number()); err != nil {
		return nil, err
	}
	if o.ListenPort < 0 || o.ListenPort > 65535 {
		return nil, fmt.Errorf("%w: listen port %d", ErrInvalid, o.ListenPort)
	}
	if o.Bind == "" {
		o.Bind = "127.0.0.1"
	}
	if _, err := netip.ParseAddr(o.Bind); err != nil {
		return nil, fmt.Errorf("%w: bind address %q", ErrInvalid, o.Bind)
	}
	if !IsLoopback(o.Bind) && !o.AllowRemote {
		return nil, ErrRemote
	}
	if o.MaxConnections < 0 {
		return nil, fmt.Errorf("%w: max connections %d", ErrInvalid, o.MaxConnections)
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 8
	}
	if o.Limits.MaxHeaderBytes <= 0 {
		o.Limits.MaxHeaderBytes = DefaultLimits.MaxHeaderBytes
	}
	if o.Limits.MaxHeaders <= 0 {
		o.Limits.MaxHeaders = DefaultLimits.MaxHeaders
	}
	if o.Limits.MaxBodyBytes <= 0 {
		o.Limits.MaxBodyBytes = DefaultLimits.MaxBodyBytes
	}
	if o.Limits.MaxChunkedBytes <= 0 {
		o.Limits.MaxChunkedBytes = DefaultLimits.MaxChunkedBytes
	}
	o.HeaderTimeout = orDefault(o.HeaderTimeout, 10*time.Second)
	o.IdleTimeout = orDefault(o.IdleTimeout, 2*time.Minute)
	o.ResponseTimeout = orDefault(o.ResponseTimeout, 2*time.Minute)
	o.TunnelIdleTimeout = orDefault(o.TunnelIdleTimeout, 10*time.Minute)
	base, err := url.Parse(up.URL())
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%w: upstream URL", ErrInvalid)
	}
	// The guard needs the port: validate the hosts with a placeholder
	// before listening, so that a bad option opens nothing.
	gopts := hostguard.Options{Bind: o.Bind, SandboxID: o.SandboxID, AllowedHosts: o.AllowedHosts, AllowOrigins: o.AllowOrigins}
	if _, err := hostguard.New(max(o.ListenPort, 1), gopts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Bind, strconv.Itoa(o.ListenPort)))
	if err != nil {
		return nil, err
	}
	guard, err := hostguard.New(ln.Addr().(*net.TCPAddr).Port, gopts)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s := &Server{
		up: up, o: o, guard: guard, ln: ln,
		slots: make(chan struct{}, o.MaxConnections),
		conns: map[net.Conn]struct{}{}, status: map[int]int64{},
	}
	idle := o.IdleTimeout
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	s.tr = &http.Transport{
		Proxy: nil, // never a proxy from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			dc := &deadlineConn{Conn: c, idle: idle}
			if h, ok := ctx.Value(upConnKey{}).(*upConnHolder); ok {
				h.set(dc)
			}
			return dc, nil
		},
		DisableKeepAlives:      true, // one upstream connection per client connection
		DisableCompression:     true, // bodies pass as they are
		ResponseHeaderTimeout:  o.ResponseTimeout,
		TLSHandshakeTimeout:    30 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// HTTP/1.1 only: upgrades need it.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	s.client = &http.Client{
		Transport:     s.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Port is the local port.
func (s *Server) Port() int { return s.guard.Port() }

// Addr is the address listened on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URLs are the addresses to open: http://<id>.localhost:<port>/ first
// when a sandbox id was given (its own cookie jar), then
// http://<bind>:<port>/.
func (s *Server) URLs() []string {
	var out []string
	port := strconv.Itoa(s.Port())
	if s.o.SandboxID != "" {
		out = append(out, "http://"+strings.ToLower(s.o.SandboxID)+".localhost:"+port+"/")
	}
	return append(out, "http://"+net.JoinHostPort(s.o.Bind, port)+"/")
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := make(map[int]int64, len(s.status))
	for k, v := range s.status {
		st[k] = v
	}
	s.mu.Unlock()
	return Stats{
		Connections: s.connections.Load(), Busy: s.busy.Load(),
		Forwarded: s.forwarded.Load(), Tunnels: s.tunnels.Load(), Status: st,
	}
}

func (s *Server) count(status int) {
	s.mu.Lock()
	s.status[status]++
	s.mu.Unlock()
}

// Serve answers until ctx ends or Close; then it closes the listener and
// every connection and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			_ = s.Close()
			s.wg.Wait()
			return err
		}
		s.connections.Add(1)
		select {
		case s.slots <- struct{}{}:
		default:
			s.busy.Add(1)
			s.count(http.StatusServiceUnavailable)
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			writeError(c, http.StatusServiceUnavailable)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				lingerClose(c)
			}()
			continue
		}
		if !s.track(c) {
			_ = c.Close()
			<-s.slots
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer s.untrack(c)
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	lingerClose(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// lingerClose half-closes c, then reads and drops what the client still
// sends (at most 1 MiB, for at most 1 s) before closing: closing with
// unread bytes would reset the connection and could destroy the answer
// on its way. What is dropped here never reaches the upstream.
func lingerClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok && tc.CloseWrite() == nil {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.CopyN(io.Discard, c, 1<<20)
	}
	_ = c.Close()
}

// Close stops listening and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.tr.CloseIdleConnections()
	return s.ln.Close()
}

// hop-by-hop fields: never forwarded in either direction (RFC 9110
// 7.6.1), plus those a Connection field names.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true,
	"proxy-authenticate": true, "proxy-authorization": true,
	"content-length": true, "host": true, "expect": true,
}

// connectionTokens are the lowercased tokens of the Connection fields.
func connectionTokens(values []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if t = strings.ToLower(trimOWS(t)); t != "" {
				out[t] = true
			}
		}
	}
	return out
}

// handle serves one client connection: one request, one answer.
func (s *Server) handle(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(s.o.HeaderTimeout))
	br := bufio.NewReaderSize(c, 4096)
	w := &deadlineWriter{c: c, idle: s.o.IdleTimeout}
	req, err := ReadRequest(br, s.o.Limits)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF), errors.As(err, &ne):
			// Nothing sent, or too slowly: dropped without an answer.
			return
		case errors.Is(err, ErrHeaderTooLarge):
			s.refuse(w, http.StatusRequestHeaderFieldsTooLarge)
		case errors.Is(err, ErrTooLarge):
			s.refuse(w, http.StatusRequestEntityTooLarge)
		default:
			s.refuse(w, http.StatusBadRequest)
		}
		return
	}
	host := req.Values("Host")[0]
	origins := req.Values("Origin")
	switch {
	case !s.guard.HostOK(host):
		s.refuse(w, http.StatusMisdirectedRequest)
		return
	case len(origins) > 1 || len(origins) == 1 && (origins[0] == "" || !s.guard.OriginOK(origins[0])):
		s.refuse(w, http.StatusForbidden)
		return
	}
	expect := req.Values("Expect")
	if len(expect) > 1 || len(expect) == 1 && !strings.EqualFold(expect[0], "100-continue") {
		s.refuse(w, http.StatusExpectationFailed)
		return
	}
	if len(expect) == 1 && req.ContentLength != 0 {
		// The body is read from the client as the upstream request is
		// sent (or before, chunked): ask for it now.
		if _, err := io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return
		}
	}
	var chunked []byte
	if req.Chunked {
		// A chunked body is read whole and checked before the upstream
		// is called: a bad chunk never reaches it. It goes on with its
		// Content-Length.
		chunked, err = io.ReadAll(&clientBody{r: req.Body(br, s.o.Limits), c: c, idle: s.o.IdleTimeout})
		switch {
		case errors.Is(err, ErrTooLarge):
			s.refuse(w, http.StatusRequestEntityTooLarge)
			return
		case errors.Is(err, ErrBadRequest):
			s.refuse(w, http.StatusBadRequest)
			return
		case err != nil:
			// The client failed or stalled: dropped.
			return
		}
	}
	out, upgrade, err := s.outgoing(ctx, req, br, c, chunked)
	if err != nil {
		s.refuse(w, http.StatusBadGateway)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	s.forwarded.Add(1)
	holder := &upConnHolder{}
	out = out.WithContext(context.WithValue(out.Context(), upConnKey{}, holder))
	resp, err := s.client.Do(out)
	if err != nil {
		if errors.Is(err, ErrBadRequest) {
			s.refuse(w, http.StatusBadRequest)
		} else if !errors.Is(err, errClientGone) {
			s.refuse(w, http.StatusBadGateway)
		}
		return
	}
	defer resp.Body.Close()
	s.count(resp.StatusCode)
	if resp.StatusCode == http.StatusSwitchingProtocols && upgrade != "" {
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			return
		}
		s.tunnels.Add(1)
		if err := writeHead(w, resp, true); err != nil {
			return
		}
		s.tunnel(c, br, rwc, holder.get())
		return
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// 101 to a request that asked for no upgrade: nothing to relay.
		return
	}
	if err := writeHead(w, resp, false); err != nil {
		return
	}
	if bodyless(req.Method, resp.StatusCode) {
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

var errClientGone = errors.New("proxy: client connection failed")

// outgoing builds the upstream request: the client's method, target and
// end-to-end fields, the port's headers, the body as framed by the
// client.
func (s *Server) outgoing(ctx context.Context, req *Request, br *bufio.Reader, c net.Conn, chunked []byte) (*http.Request, string, error) {
	ph, err := s.up.Headers(ctx)
	if err != nil {
		return nil, "", err
	}
	base, err := url.Parse(s.up.URL())
	if err != nil {
		return nil, "", err
	}
	path, query, hasQuery := strings.Cut(req.Target, "?")
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, RawQuery: query, ForceQuery: hasQuery && query == ""}
	if strings.HasPrefix(path, "//") {
		p, err := url.PathUnescape(path)
		if err != nil {
			return nil, "", err
		}
		u.Path, u.RawPath = p, path
	} else {
		u.Opaque = path
	}
	var body io.Reader = http.NoBody
	length := req.ContentLength
	switch {
	case req.Chunked:
		body, length = bytes.NewReader(chunked), int64(len(chunked))
	case length != 0:
		body = &clientBody{r: req.Body(br, s.o.Limits), c: c, idle: s.o.IdleTimeout}
	}
	out, err := http.NewRequestWithContext(ctx, req.Method, base.Scheme+"://"+base.Host+"/", body)
	if err != nil {
		return nil, "", err
	}
	out.URL = u
	out.ContentLength = length
	if length == 0 {
		out.Body = http.NoBody
	}
	conn := connectionTokens(req.Values("Connection"))
	upgrade := ""
	if ups := req.Values("Upgrade"); conn["upgrade"] && len(ups) == 1 && ups[0] != "" {
		upgrade = ups[0]
	}
	h := http.Header{}
	for _, f := range req.Fields {
		name := strings.ToLower(f.Name)
		if hopByHop[name] || conn[name] || strings.HasPrefix(name, "x-aws-proxy-") {
			continue
		}
		v := f.Value
		if name == "cookie" {
			if v = stripDashboardCookies(v); v == "" {
				continue
			}
		}
		h[http.CanonicalHeaderKey(f.Name)] = append(h[http.CanonicalHeaderKey(f.Name)], v)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // not Go's default
	}
	if upgrade != "" {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", upgrade)
	}
	for k, vs := range ph {
		if strings.EqualFold(k, "Host") {
			continue
		}
		h[k] = vs
	}
	out.Header = h
	out.Host = ph.Get("Host")
	if out.Host == "" {
		out.Host = base.Host
	}
	return out, upgrade, nil
}

// stripDashboardCookies removes the cookie pairs named rayito_dashboard_*
// from a Cookie value, keeping the rest as sent.
func stripDashboardCookies(v string) string {
	var kept []string
	for _, pair := range strings.Split(v, ";") {
		name, _, _ := strings.Cut(pair, "=")
		if strings.HasPrefix(strings.ToLower(trimOWS(name)), "rayito_dashboard_") {
			continue
		}
		if p := trimOWS(pair); p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// bodyless: answers that carry no body.
func bodyless(method string, status int) bool {
	return method == http.MethodHead || status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
}

// writeHead writes the response head: the status, the end-to-end
// fields (without rayito_dashboard_* cookies set by the sandbox), the
// length when known, and Connection: close (Connection: Upgrade and
// Upgrade for a 101).
func writeHead(w io.Writer, resp *http.Response, upgrade bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, statusText(resp.StatusCode))
	conn := connectionTokens(resp.Header.Values("Connection"))
	for k, vs := range resp.Header {
		lk := strings.ToLower(k)
		if hopByHop[lk] || conn[lk] {
			continue
		}
		for _, v := range vs {
			if lk == "set-cookie" && strings.HasPrefix(strings.ToLower(trimOWS(v)), "rayito_dashboard_") {
				continue
			}
			if !isToken(k) || !validValue(v) {
				continue
			}
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	switch {
	case upgrade:
		b.WriteString("Connection: Upgrade\r\nUpgrade: " + resp.Header.Get("Upgrade") + "\r\n\r\n")
	default:
		if resp.ContentLength >= 0 && !bodyless(resp.Request.Method, resp.StatusCode) {
			b.WriteString("Content-Length: " + strconv.FormatInt(resp.ContentLength, 10) + "\r\n")
		}
		b.WriteString("Connection: close\r\n\r\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}

// refuse answers the proxy's own error and counts it.
func (s *Server) refuse(w io.Writer, status int) {
	s.count(status)
	writeError(w, status)
}

func writeError(w io.Writer, status int) {
	msg := strconv.Itoa(status) + " " + statusText(status) + "\n"
	_, _ = io.WriteString(w, "HTTP/1.1 "+strconv.Itoa(status)+" "+statusText(status)+"\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"+
		"Cache-Control: no-store\r\nContent-Length: "+strconv.Itoa(len(msg))+"\r\nConnection: close\r\n\r\n"+msg)
}

// tunnel relays bytes both ways after a 101 until either side closes or
// no byte has passed in either direction for TunnelIdleTimeout (a
// WebSocket may be quiet one way for long: activity either way counts).
func (s *Server) tunnel(c net.Conn, br *bufio.Reader, up io.ReadWriteCloser, upConn *deadlineConn) {
	idle := s.o.TunnelIdleTimeout
	if upConn != nil {
		upConn.tunnel.Store(true)
	}
	touch := func() {
		t := time.Now().Add(idle)
		_ = c.SetDeadline(t)
		if upConn != nil {
			_ = upConn.Conn.SetDeadline(t)
		}
	}
	touch()
	done := make(chan struct{}, 2)
	go func() {
		// client → upstream: what the client buffered after the request,
		// then the rest.
		_, _ = io.Copy(up, &touchReader{r: br, touch: touch})
		_ = up.Close()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, &touchReader{r: up, touch: touch})
		_ = c.Close()
		done <- struct{}{}
	}()
	<-done
	_ = up.Close()
	_ = c.Close()
	<-done
}

// touchReader calls touch after each read that returned bytes.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// deadlineWriter sets a write deadline before each write.
type deadlineWriter struct {
	c    net.Conn
	idle time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.c.SetWriteDeadline(time.Now().Add(d.idle))
	return d.c.Write(p)
}

// clientBody is the request body read from the client with a deadline
// per read; a failure of the client is errClientGone (no answer).
type clientBody struct {
	r    io.Reader
	c    net.Conn
	idle time.Duration
}

func (b *clientBody) Read(p []byte) (int, error) {
	_ = b.c.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrBadRequest) {
		err = fmt.Errorf("%w: %w", errClientGone, err)
	}
	return n, err
}

// deadlineConn is an upstream connection with a deadline per read and
// write; in a tunnel, the tunnel's shared deadline instead.
type deadlineConn struct {
	net.Conn
	idle   time.Duration
	tunnel atomic.Bool
}

func (d *deadlineConn) Read(p []byte) (int, error) {
	if !d.tunnel.Load() {
		_ = d.Conn.SetReadDeadline(time.Now().Add(d.idle))
	}
	return d.Conn.Read(p)
}

func (d *deadlineConn) Write(p []byte) (int, error) {
	if !d.tunnel.Load() {
		_ = d.Conn.SetWriteDeadline(time.Now().Add(d.idle))
	}
	return d.Conn.Write(p)
}

// upConnKey carries an *upConnHolder in a request's context: the dial
// puts the upstream connection in it, for a tunnel's deadlines.
type upConnKey struct{}

type upConnHolder struct {
	mu sync.Mutex
	c  *deadlineConn
}

func (h *upConnHolder) set(c *deadlineConn) {
	h.mu.Lock()
	h.c = c
	h.mu.Unlock()
}

func (h *upConnHolder) get() *deadlineConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.c
}
