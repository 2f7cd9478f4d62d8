package gateway

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Gateway. Zero values select the defaults.
type Options struct {
	// Resolve resolves an upstream host name. Default:
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials a guarded upstream address. Default: a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Blocked is the address guard; default DefaultBlocked. If any
	// resolved address is blocked the request fails (upstream_error) and
	// nothing is dialed.
	Blocked func(netip.Addr) bool
	// RootCAs is the upstream trust; nil = system roots.
	RootCAs *x509.CertPool
	// Listen opens route listeners ("tcp", "127.0.0.1:0"). Default net.Listen.
	Listen func(network, address string) (net.Listener, error)
	// ConnectTimeout bounds resolve + dial + TLS handshake (default 10 s).
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the response head (default 600 s).
	HeaderTimeout time.Duration
	// Now is the clock of the rate limiter and certificates (default time.Now).
	Now func() time.Time
	// Logger receives counts, names and classes only (default: discard).
	Logger *slog.Logger
}

// ErrClosed is returned by SetRoutes and SetPlaceholders after Close.
var ErrClosed = errors.New("gateway: closed")

const (
	maxClientConnsPerRoute = 64
	clientIdleTimeout      = 90 * time.Second
	clientHeaderTimeout    = 60 * time.Second
	maxRequestHeaderBytes  = 64 << 10
	maxRetiredTransports   = 32
)

var discardLog = log.New(io.Discard, "", 0)

// Gateway is the secret gateway. It is safe for concurrent use.
type Gateway struct {
	opts   Options
	log    *slog.Logger
	ca     *ca
	proxy  *httputil.ReverseProxy
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // serializes SetRoutes, SetPlaceholders, SetHeaderRules, Close
	closed   bool
	routes   map[string]*routeState
	phStates map[string]*phState

	phs atomic.Pointer[phSet]
	hrs atomic.Pointer[[]*headerRuleConfig] // the header rules (immutable)

	upMu       sync.Mutex
	upstreams  map[hostPort]*upstream // intercepted hosts
	transports map[*http.Transport]bool
	retired    []*http.Transport
	inter      map[*http.Server]net.Conn

	auditLog auditLog // which secret went to which host (audit.go)
}

// RouteStatus is the status of one route.
type RouteStatus struct {
	Name           string
	Port           uint16
	Requests       uint64 // requests received
	Refused        uint64 // requests answered with a refusal of any class
	LastErrorClass string
}

// PlaceholderStatus is the status of one placeholder.
type PlaceholderStatus struct {
	Name           string
	Injected       uint64 // requests in which the secret was substituted
	Blocked        uint64 // placeholder_blocked refusals (incl. CheckPlain)
	LastErrorClass string
}

// New returns a Gateway with no routes and no placeholders, and generates
// its per-sandbox CA (ECDSA P-256; the key stays in memory only).
func New(opts Options) (*Gateway, error) {
	if opts.Resolve == nil {
		opts.Resolve = defaultResolve
	}
	if opts.Dial == nil {
		opts.Dial = defaultDial
	}
	if opts.Blocked == nil {
		opts.Blocked = DefaultBlocked
	}
	if opts.Listen == nil {
		opts.Listen = net.Listen
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 600 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	c, err := newCA(opts.Now)
	if err != nil {
		return nil, errors.New("gateway: generating the CA failed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		opts:       opts,
		log:        lg,
		ca:         c,
		ctx:        ctx,
		cancel:     cancel,
		routes:     map[string]*routeState{},
		phStates:   map[string]*phState{},
		upstreams:  map[hostPort]*upstream{},
		transports: map[*http.Transport]bool{},
		inter:      map[*http.Server]net.Conn{},
	}
	g.proxy = g.newProxy()
	g.phs.Store(&phSet{})
	g.hrs.Store(&[]*headerRuleConfig{})
	return g, nil
}

// CACertPEM returns the PEM encoding of the per-sandbox CA certificate.
func (g *Gateway) CACertPEM() []byte { return append([]byte(nil), g.ca.pem...) }

func (g *Gateway) trackTransport(t *http.Transport) {
	g.upMu.Lock()
	g.transports[t] = true
	g.upMu.Unlock()
}

// retireTransport closes t's idle connections; t is kept (bounded) so
// that Close can close connections in-flight requests return later.
func (g *Gateway) retireTransport(t *http.Transport) {
	t.CloseIdleConnections()
	g.upMu.Lock()
	defer g.upMu.Unlock()
	delete(g.transports, t)
	g.retired = append(g.retired, t)
	if len(g.retired) > maxRetiredTransports {
		g.retired[0].CloseIdleConnections()
		g.retired = g.retired[1:]
	}
}

// Routes returns the status of every route, sorted by name.
func (g *Gateway) Routes() []RouteStatus {
	g.mu.Lock()
	out := make([]RouteStatus, 0, len(g.routes))
	for _, rs := range g.routes {
		out = append(out, RouteStatus{
			Name: rs.name, Port: rs.port,
			Requests: rs.requests.Load(), Refused: rs.refused.Load(),
			LastErrorClass: loadClass(&rs.lastErr),
		})
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Placeholders returns the status of every placeholder, sorted by name.
func (g *Gateway) Placeholders() []PlaceholderStatus {
	set := g.phs.Load()
	out := make([]PlaceholderStatus, 0, len(set.list))
	for _, e := range set.list {
		out = append(out, PlaceholderStatus{
			Name: e.st.name, Injected: e.st.injected.Load(), Blocked: e.st.blocked.Load(),
			LastErrorClass: loadClass(&e.st.lastErr),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func loadClass(v *atomic.Pointer[string]) string {
	if p := v.Load(); p != nil {
		return *p
	}
	return ""
}

// Close stops every route listener and intercepted connection and closes
// upstream connections. It is idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.cancel()
	for _, rs := range g.routes {
		rs.srv.Close()
	}
	g.upMu.Lock()
	for s, c := range g.inter {
		c.Close()
		s.Close()
	}
	g.upMu.Unlock()
	g.mu.Unlock()
	g.wg.Wait()
	g.upMu.Lock()
	for t := range g.transports {
		t.CloseIdleConnections()
	}
	for _, t := range g.retired {
		t.CloseIdleConnections()
	}
	g.upMu.Unlock()
	g.log.Info("gateway closed")
	return nil
}
