package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/gateway/duplex"
)

// Error classes: the closed set that status, logs and refusal bodies carry.
const (
	ClassNotAllowed      = "not_allowed"         // 403: path characters or method/path rule
	ClassRateLimited     = "rate_limited"        // 429
	ClassUpstreamTimeout = "upstream_timeout"    // 504: connect or response head timeout
	ClassUpstreamError   = "upstream_error"      // 502: any other upstream failure
	ClassBlocked         = "placeholder_blocked" // 403: a placeholder sent where it is not allowed
	ClassBadRequest      = "bad_request"         // 400
)

func classStatus(class string) int {
	switch class {
	case ClassNotAllowed, ClassBlocked:
		return http.StatusForbidden
	case ClassRateLimited:
		return http.StatusTooManyRequests
	case ClassUpstreamTimeout:
		return http.StatusGatewayTimeout
	case ClassBadRequest:
		return http.StatusBadRequest
	default:
		return http.StatusBadGateway
	}
}

// refuse answers with the class's status and {"error":"<class>"}.
func refuse(w http.ResponseWriter, class string, retryAfter int) {
	h := w.Header()
	clear(h)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(classStatus(class))
	_, _ = io.WriteString(w, `{"error":"`+class+`"}`)
}

func canonicalKey(s string) string { return http.CanonicalHeaderKey(s) }

// upstream is one https://host:port target with its own connection pool.
type upstream struct {
	host      string
	port      uint16
	authority string
	transport *http.Transport
}

func (g *Gateway) newUpstream(host string, port uint16) *upstream {
	authority := host
	if strings.IndexByte(host, ':') >= 0 {
		authority = "[" + host + "]"
	}
	if port != 443 {
		authority = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	u := &upstream{host: host, port: port, authority: authority}
	u.transport = &http.Transport{
		Proxy: nil,
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return g.dialTLS(ctx, host, port)
		},
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("gateway: plain upstream connections are not used")
		},
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:     true,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  g.opts.HeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	g.trackTransport(u.transport)
	return u
}

// fwd is what one request's forwarding needs; it travels in the request
// context from the mode-specific handler to the shared ReverseProxy.
type fwd struct {
	up       *upstream
	setPath  bool   // replace the outbound path with path/rawPath
	path     string // once-decoded
	rawPath  string // exactly as received
	inject   []injected
	rewrite  func(http.Header) // placeholder replacement, applied before inject
	dropResp []string          // canonical names removed from the response
	scrub    []string          // secret values; response headers containing one are removed
	fail     func(class string)
	// sent, when set, is called as the request leaves with the injected
	// headers (for the audit trail).
	sent func()
}

type fwdKey struct{}

func fwdFrom(ctx context.Context) *fwd {
	f, _ := ctx.Value(fwdKey{}).(*fwd)
	return f
}

// forward sends r upstream as described by f. It is the single forwarding
// implementation of both modes.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, f *fwd) {
	ctx := context.WithValue(r.Context(), fwdKey{}, f)
	// In full duplex: the upstream may answer before it has read the whole
	// body (a 401 to an upload); without it the server would consume and
	// close the body under the transport still sending it, which drops
	// the connection and cuts the answer. Through duplex.Forward, so that
	// the transport never reads the body after this handler returns (an
	// upstream that fails mid-body would otherwise make net/http panic in
	// a goroutine nothing recovers: rayd itself would die).
	duplex.Forward(w, r.WithContext(ctx), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.proxy.ServeHTTP(no1xxWriter{w}, r)
	}))
}

func (g *Gateway) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       rewrite,
		Transport:     dispatchTransport{},
		FlushInterval: -1,
		ErrorLog:      discardLog,
		ModifyResponse: func(res *http.Response) error {
			f := fwdFrom(res.Request.Context())
			if f == nil {
				return errors.New("gateway: no forwarding context")
			}
			scrubHeader(res.Header, f)
			if res.Body != nil && res.Body != http.NoBody {
				res.Body = &trailerScrubber{ReadCloser: res.Body, res: res, f: f}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			class := classifyUpstream(err)
			if f := fwdFrom(r.Context()); f != nil && f.fail != nil {
				f.fail(class)
			}
			refuse(w, class, 0)
		},
	}
}

func rewrite(pr *httputil.ProxyRequest) {
	f := fwdFrom(pr.In.Context())
	out := pr.Out
	if f == nil {
		// Cannot happen; make the request fail rather than go anywhere.
		out.URL.Scheme, out.URL.Host = "https", "invalid."
		return
	}
	in := pr.In
	out.URL.Scheme = "https"
	out.URL.Host = f.up.authority
	out.URL.User = nil
	out.URL.Fragment, out.URL.RawFragment = "", ""
	out.Host = ""
	if f.setPath {
		out.URL.Opaque = ""
		out.URL.Path = f.path
		out.URL.RawPath = f.rawPath
	}
	// The query string is forwarded exactly as received.
	out.URL.RawQuery = in.URL.RawQuery
	out.URL.ForceQuery = in.URL.ForceQuery
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	for k := range out.Header {
		if strings.HasPrefix(k, "Proxy-") {
			delete(out.Header, k)
		}
	}
	if f.rewrite != nil {
		f.rewrite(out.Header)
	}
	for _, h := range f.inject {
		out.Header.Del(h.name)
	}
	for _, h := range f.inject {
		out.Header.Set(h.name, h.value)
	}
	if f.sent != nil {
		f.sent()
	}
}

// dispatchTransport sends each request through its upstream's transport.
type dispatchTransport struct{}

func (dispatchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := fwdFrom(req.Context())
	if f == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("gateway: no forwarding context")
	}
	return f.up.transport.RoundTrip(req)
}

func classifyUpstream(err error) string {
	if errors.Is(err, errBlockedAddress) {
		return ClassUpstreamError
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassUpstreamTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassUpstreamTimeout
	}
	return ClassUpstreamError
}

// scrubHeader removes from a response header the injected header names,
// hop-by-hop headers and every header whose name or a value contains a
// vaulted secret.
func scrubHeader(h http.Header, f *fwd) {
	for _, n := range f.dropResp {
		h.Del(n)
	}
	for _, n := range f.inject {
		h.Del(n.name)
	}
	for _, n := range hopByHop {
		h.Del(n)
	}
	if len(f.scrub) == 0 {
		return
	}
	for k, vv := range h {
		if containsAny(k, f.scrub) {
			delete(h, k)
			continue
		}
		for _, v := range vv {
			if containsAny(v, f.scrub) {
				delete(h, k)
				break
			}
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// trailerScrubber scrubs response trailers once the body is done (the
// transport fills res.Trailer just before returning io.EOF).
type trailerScrubber struct {
	io.ReadCloser
	res *http.Response
	f   *fwd
}

func (t *trailerScrubber) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil && len(t.res.Trailer) > 0 {
		scrubHeader(t.res.Trailer, t.f)
	}
	return n, err
}

func (t *trailerScrubber) Close() error {
	err := t.ReadCloser.Close()
	if len(t.res.Trailer) > 0 {
		scrubHeader(t.res.Trailer, t.f)
	}
	return err
}

// no1xxWriter drops informational responses (their headers would bypass
// the response scrubbing); net/http sends 100 Continue by itself.
type no1xxWriter struct{ http.ResponseWriter }

func (w no1xxWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w no1xxWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
