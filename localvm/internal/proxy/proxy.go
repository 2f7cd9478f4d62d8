// Package proxy is the local platform's endpoint proxy: the stand-in for
// the proxy that AWS Lambda MicroVMs runs in front of every microVM's
// endpoint. It receives client requests addressed to an endpoint, checks
// the x-aws-proxy-auth token and the x-aws-proxy-port header, and forwards
// the request to that port of the guest, streaming both ways.
//
// The guest sees what it would see behind the AWS proxy: the endpoint as
// Host, and none of the x-aws-proxy-* headers. Errors are answered the way
// AWS does, with a small JSON body {"message": "..."}:
//
//   - 400 when x-aws-proxy-port is not a port number;
//   - 403 when the token is missing or invalid, or does not allow the
//     port, and always for the hooks port 9000;
//   - 404 when the endpoint is unknown;
//   - 502 when the microVM is not running (and does not auto-resume, or
//     its resume failed) or the guest port does not answer.
//
// A request for a SUSPENDED microVM whose idle policy auto-resumes it
// (Target.AutoResume) is authorized as usual, then held while the microVM
// resumes (Target.Wake) and forwarded once it is RUNNING.
//
// For the idle policy the proxy counts, per microVM (Target.Activity), the
// bytes of every forwarded request's and response's body (and of upgraded
// connections) and the forwarded requests in flight, held ones included,
// with atomics; it never keeps or logs any of the traffic itself.
//
// The proxy never logs headers, tokens, paths or bodies: one debug record
// per request gives the microVM id, the port, the status and the duration
// (and, for a 502 from the guest side, the dial or protocol error).
package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/gateway/duplex"
	"github.com/rayito-dev/rayito/localvm/internal/activity"
	"github.com/rayito-dev/rayito/localvm/internal/authtoken"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// EndpointHeader names the endpoint for clients that cannot set Host. When
// present it takes precedence over Host. It is never forwarded.
const EndpointHeader = "x-rayito-endpoint"

// Target is one microVM as the proxy sees it.
type Target interface {
	// MicrovmID is the id tokens must be minted for.
	MicrovmID() string
	// Running is false for any state but RUNNING.
	Running() bool
	// AutoResume reports whether a request resumes the microVM: it is
	// SUSPENDING or SUSPENDED, and its idle policy auto-resumes it.
	AutoResume() bool
	// Wake returns nil once the microVM is RUNNING, resuming it first if
	// it auto-resumes, and an error if it is not running and does not
	// (or its resume failed, or ctx ended).
	Wake(ctx context.Context) error
	// Activity is the microVM's traffic meter (nil: not counted).
	Activity() *activity.Meter
	// Addr returns a host-reachable address (host:port) of a guest port,
	// or an error when that port cannot be reached.
	Addr(port int) (string, error)
}

// Verifier checks a token for a microVM and a port; *authtoken.Minter is
// one.
type Verifier interface {
	Verify(token, microvmID string, port int) (*authtoken.Claims, error)
}

// Options configure a Proxy.
type Options struct {
	// Lookup finds the microVM of an endpoint (a host name without port,
	// lowercased).
	Lookup func(endpoint string) (Target, bool)
	// Verifier checks x-aws-proxy-auth tokens.
	Verifier Verifier
	// Logger receives one debug record per request; nil discards.
	Logger *slog.Logger
	// EndpointSuffix makes Match accept requests whose Host (without port)
	// ends with it, e.g. ".microvms.localhost". Compared case-insensitively.
	EndpointSuffix string
	// DialContext dials guests; nil means a net.Dialer (10 s timeout).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Proxy is the endpoint proxy, an http.Handler. It is safe for concurrent
// use.
type Proxy struct {
	lookup   func(string) (Target, bool)
	verifier Verifier
	log      *slog.Logger
	suffix   string
	h1, h2c  *http.Transport
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	bufs     *copyBuffers // requests' bodies
	tunBufs  *copyBuffers // tunnels'
	tunnels  tunnelSet
	rpH1     *httputil.ReverseProxy
	rpH2C    *httputil.ReverseProxy
}

// New returns a Proxy. Lookup and Verifier are required (New panics
// without them).
func New(opts Options) *Proxy {
	if opts.Lookup == nil || opts.Verifier == nil {
		panic("proxy: Options.Lookup and Options.Verifier are required")
	}
	p := &Proxy{
		lookup:   opts.Lookup,
		verifier: opts.Verifier,
		log:      opts.Logger,
		suffix:   strings.ToLower(opts.EndpointSuffix),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.dial = opts.DialContext
	if p.dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		p.dial = d.DialContext
	}
	var h1, h2c http.Protocols
	h1.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	p.h1 = newTransport(h1, p.dial)
	p.h2c = newTransport(h2c, p.dial)
	p.bufs = newCopyBuffers(copyBufferSize)
	p.tunBufs = newCopyBuffers(tunnelBufferSize)
	p.rpH1 = newReverseProxy(p.h1, p.bufs)
	p.rpH2C = newReverseProxy(p.h2c, p.bufs)
	return p
}

// newTransport returns a transport to guests speaking only protocols.
func newTransport(protocols http.Protocols, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // guests are local: never an HTTP proxy from the environment
		DialContext:         dial,
		Protocols:           &protocols,
		DisableCompression:  true, // pass bodies through as they are
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		// Let rayd send 1 MiB frames (the default 16 KiB costs a system
		// call per 16 KiB of output).
		HTTP2: &http.HTTP2Config{MaxReadFrameSize: 1 << 20},
		// Fewer, larger system calls on HTTP/1.1 bodies (default 4 KiB).
		WriteBufferSize: 256 << 10,
		ReadBufferSize:  256 << 10,
		// No response header timeout: gRPC and long polls may answer late.
	}
}

// newReverseProxy returns a streaming reverse proxy over t.
func newReverseProxy(t http.RoundTripper, bufs httputil.BufferPool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      t,
		FlushInterval:  -1, // flush every write: streams, SSE, gRPC
		BufferPool:     bufs,
		ErrorHandler:   upstreamError,
		ModifyResponse: recordStatus,
		// ReverseProxy's own messages may quote URLs; keep them out.
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
	}
}

// copyBufferSize is the size of the buffers bodies are copied through: a
// read of the guest's answer is one write (and one flush) to the client,
// and the default 32 KiB splits rayd's 64 KiB output messages in three.
const copyBufferSize = 256 << 10

// tunnelBufferSize is the size of a tunnel's two copy buffers: a tunnel
// holds them while it is open, idle ones in a client's pool too, so they
// are smaller than a request's (still one of rayd's 64 KiB output
// messages per read).
const tunnelBufferSize = 64 << 10

// copyBuffers is a pool of buffers of one size; the reverse proxies' is
// their httputil.BufferPool.
type copyBuffers struct {
	pool sync.Pool
	size int
}

func newCopyBuffers(size int) *copyBuffers {
	c := &copyBuffers{size: size}
	c.pool.New = func() any { b := make([]byte, size); return &b }
	return c
}

func (c *copyBuffers) Get() []byte { return *c.pool.Get().(*[]byte) }

func (c *copyBuffers) Put(b []byte) {
	if cap(b) == c.size {
		b = b[:c.size]
		c.pool.Put(&b)
	}
}

// CloseIdleConnections closes idle connections to guests.
func (p *Proxy) CloseIdleConnections() {
	p.h1.CloseIdleConnections()
	p.h2c.CloseIdleConnections()
}

// Close closes idle connections to guests and every open tunnel; tunnels
// opened afterwards are refused (502). Requests in flight are the
// server's to end.
func (p *Proxy) Close() {
	p.CloseIdleConnections()
	p.tunnels.closeAll()
}

// Match reports whether r is for the proxy: it carries EndpointHeader, or
// its Host without port ends with Options.EndpointSuffix (and is longer).
func (p *Proxy) Match(r *http.Request) bool {
	if _, ok := r.Header[http.CanonicalHeaderKey(EndpointHeader)]; ok {
		return true
	}
	if p.suffix == "" {
		return false
	}
	h := hostname(r.Host)
	return len(h) > len(p.suffix) && strings.HasSuffix(h, p.suffix)
}

// hostname returns host without port, lowercased, without a trailing dot.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// ctxKey keys the per-request route in the request context.
type ctxKey struct{}

// route is what ServeHTTP decided for one request, read by the reverse
// proxy's hooks.
type route struct {
	endpoint string
	id       string // the microVM's, once found
	port     int    // the guest port, once parsed
	addr     string
	status   int    // the status sent, for the log
	err      string // why the guest could not be reached, for the log
}

// ServeHTTP authorizes r and forwards it to the guest. In order:
//
//  1. The endpoint is EndpointHeader if present, else Host without port;
//     unknown: 404. A microVM that is not running and does not
//     auto-resume: 502.
//  2. x-aws-proxy-auth must hold exactly one non-empty value: else 403.
//  3. x-aws-proxy-port defaults to 8080; anything but one value of one to
//     five digits worth 1..65535 is 400; 9000 is 403, never forwarded.
//  4. The Verifier must accept the token for the microVM and port: else 403.
//  5. A microVM that is not running is woken (Target.Wake): the request
//     waits until it runs, or is answered 502 if it does not.
//  6. The request goes to Target.Addr(port) (an error there is 502), over
//     h2c when x-aws-proxy-force-h2 is "true" and HTTP/1.1 otherwise, with
//     Host set to the endpoint and without any x-aws-proxy-* header,
//     EndpointHeader, hop-by-hop header or client-sent Forwarded and
//     X-Forwarded-* header. Bodies stream both ways, flushed as they come;
//     trailers and protocol upgrades (WebSocket) pass through. A guest that
//     cannot be reached or fails before answering gives 502.
//  7. A request for a tunnel (Upgrade: localplatform.TunnelProtocol, see
//     tunnel.go) must be an HTTP/1.1 GET with Connection: Upgrade and no
//     body (else 400); it is answered 101 and the connection then carries
//     bytes between the client and the guest port.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt := &route{}
	// Runs on ErrAbortHandler panics too (a stream cut mid-way).
	defer p.logRequest(r, rt, start)
	fail := func(code int, msg string) {
		rt.status = code
		writeError(w, code, msg)
	}
	target, claims, code, msg := p.authorize(r, rt)
	if code != 0 {
		fail(code, msg)
		return
	}
	port := rt.port
	tunnel := isTunnel(r)
	if tunnel && !tunnelRequestOK(r) {
		fail(http.StatusBadRequest, "Invalid tunnel request")
		return
	}

	// From here on the request counts as traffic: in flight while it is
	// held and forwarded, its bodies' bytes as they go.
	meter := target.Activity()
	meter.Begin()
	defer meter.End()
	if !target.Running() {
		if err := target.Wake(r.Context()); err != nil {
			fail(http.StatusBadGateway, "MicroVM is not running")
			return
		}
	}
	addr, err := target.Addr(port)
	if err != nil {
		fail(http.StatusBadGateway, "Bad gateway")
		return
	}
	rt.addr = addr
	if tunnel {
		p.tunnel(w, r, rt, target, addr, claims.Expiry)
		return
	}
	if meter != nil {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countingBody{ReadCloser: r.Body, m: meter}
		}
		w = &countingWriter{ResponseWriter: w, m: meter}
	}

	rp := p.rpH1
	if strings.EqualFold(strings.TrimSpace(r.Header.Get(microvmsapi.ProxyForceH2Header)), "true") {
		rp = p.rpH2C
	}
	// In full duplex (an HTTP/1.1 client keeps sending its body while the
	// response streams back), through a body the transport can no longer
	// read once this handler returns: a guest that fails or answers before
	// taking the whole body must not leave a reader behind (net/http
	// panics on it, in a goroutine nothing recovers).
	duplex.Forward(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rt)), rp)
}

// authorize runs steps 1 to 4 of ServeHTTP: it finds r's microVM, checks
// its state, the token and the port, and notes them in rt. A refusal is
// its status and message (code 0: authorized).
func (p *Proxy) authorize(r *http.Request, rt *route) (Target, *authtoken.Claims, int, string) {
	if v, ok := r.Header[http.CanonicalHeaderKey(EndpointHeader)]; ok {
		if len(v) == 1 {
			rt.endpoint = hostname(strings.TrimSpace(v[0]))
		}
	} else {
		rt.endpoint = hostname(r.Host)
	}
	var target Target
	if rt.endpoint != "" {
		target, _ = p.lookup(rt.endpoint)
	}
	if target == nil {
		return nil, nil, http.StatusNotFound, "Endpoint not found"
	}
	rt.id = target.MicrovmID()
	if !target.Running() && !target.AutoResume() {
		return nil, nil, http.StatusBadGateway, "MicroVM is not running"
	}
	tokens := r.Header.Values(microvmsapi.ProxyAuthHeader)
	if len(tokens) != 1 || tokens[0] == "" {
		return nil, nil, http.StatusForbidden, "Forbidden"
	}
	port, ok := parsePort(r.Header.Values(microvmsapi.ProxyPortHeader))
	if !ok {
		return nil, nil, http.StatusBadRequest, "Invalid " + microvmsapi.ProxyPortHeader + " header"
	}
	rt.port = port
	if port == microvmsapi.HooksPort {
		return nil, nil, http.StatusForbidden, "Forbidden"
	}
	claims, err := p.verifier.Verify(tokens[0], rt.id, port)
	if err != nil {
		return nil, nil, http.StatusForbidden, "Forbidden"
	}
	return target, claims, 0, ""
}

// logRequest writes the request's one debug record: status, duration,
// microVM, port and the guest-side error, never anything of the request.
func (p *Proxy) logRequest(r *http.Request, rt *route, start time.Time) {
	if !p.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.Int("status", rt.status), slog.Duration("duration", time.Since(start))}
	if rt.id != "" {
		attrs = append(attrs, slog.String("microvm", rt.id))
	}
	if rt.port != 0 {
		attrs = append(attrs, slog.Int("port", rt.port))
	}
	if rt.err != "" {
		attrs = append(attrs, slog.String("error", rt.err))
	}
	p.log.LogAttrs(r.Context(), slog.LevelDebug, "endpoint request", attrs...)
}

// parsePort parses the values of x-aws-proxy-port: none means
// DefaultProxyPort; otherwise there must be exactly one value of one to
// five ASCII digits (no sign, no spaces) worth 1..65535.
func parsePort(values []string) (int, bool) {
	switch len(values) {
	case 0:
		return microvmsapi.DefaultProxyPort, true
	case 1:
	default:
		return 0, false
	}
	s := values[0]
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// rewrite builds the upstream request. ReverseProxy has already removed
// hop-by-hop headers and client-sent Forwarded and X-Forwarded-* headers.
func rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(ctxKey{}).(*route)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = rt.addr
	pr.Out.Host = rt.endpoint
	for k := range pr.Out.Header {
		if isProxyHeader(k) {
			delete(pr.Out.Header, k)
		}
	}
}

// isProxyHeader reports whether a header name is one the guest must not
// see: x-aws-proxy-* or EndpointHeader, in any case.
func isProxyHeader(name string) bool {
	const prefix = "x-aws-proxy-"
	return len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) ||
		strings.EqualFold(name, EndpointHeader)
}

// recordStatus notes the guest's status for the log.
func recordStatus(res *http.Response) error {
	if rt, ok := res.Request.Context().Value(ctxKey{}).(*route); ok {
		rt.status = res.StatusCode
	}
	return nil
}

// upstreamError answers 502 when the guest cannot be reached or fails
// before answering.
func upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if rt, ok := r.Context().Value(ctxKey{}).(*route); ok {
		rt.status = http.StatusBadGateway
		// A *url.Error quotes the URL, and so the path: keep what is
		// under it (a dial or protocol error).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		rt.err = err.Error()
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads the answer.
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	writeError(w, http.StatusBadGateway, "Bad gateway")
}

// writeError answers code with {"message": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(body)
}

// countingBody counts a request body's bytes as the guest reads them.
type countingBody struct {
	io.ReadCloser
	m *activity.Meter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.m.In(n)
	return n, err
}

// countingWriter counts a response body's bytes as they go to the client.
// http.ResponseController reaches the writer's Flush and full-duplex
// support through Unwrap; Hijack (protocol upgrades) is its own, so that
// the upgraded connection is counted too.
type countingWriter struct {
	http.ResponseWriter
	m *activity.Meter
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.m.Out(n)
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &countingConn{Conn: conn, m: w.m}, brw, nil
}

// countingConn counts an upgraded connection's bytes both ways.
type countingConn struct {
	net.Conn
	m *activity.Meter
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.m.In(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.m.Out(n)
	return n, err
}
