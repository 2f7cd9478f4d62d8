// Package egress is rayd's local egress proxy and DNS forwarder for the
// processes of a sandbox (uids 1000-65535) under the ProxyOnly egress
// mode (SECURITY.md T17, features "Egress policy").
//
// Another package installs the firewall rules that reject the sandbox's
// direct traffic and redirect it here; rayd runs as root, so the
// proxy's own outbound connections are not subject to them. The proxy
// therefore is the only way out, and it must not become an SSRF device:
//
//   - every request names a host, which the [HostPolicy] must allow
//     before anything else happens (a denied name is never resolved);
//   - the name is resolved by rayd and every resolved address is
//     guarded: if any of them is loopback, unspecified, link-local, the
//     IMDS, multicast, broadcast/reserved, 0.0.0.0/8, one of the guest's
//     own addresses, or an IPv6 form embedding an IPv4 address, the
//     request is refused (see the guard list on [Proxy]);
//   - only guarded addresses are dialed, directly or through the
//     operator's SOCKS5 [Upstream], whose own address is guarded the
//     same way (resolved by rayd, every address checked, a localhost
//     name never resolved) before each dial: the operator's proxy
//     cannot point rayd, which the sandbox's rules do not hold, at its
//     own loopback, the metadata service or a link-local neighbour;
//   - the bytes are spliced unchanged, except in the absolute-form
//     http:// case, the only one where the Host header is rewritten (to
//     the URL's authority).
//
// The [DNS] forwarder answers the sandbox's redirected DNS queries only
// for names the policy allows, and REFUSED otherwise.
//
// Nothing in this package logs host names, URLs, headers, payloads or
// the upstream's credentials: only counts and reason classes.
package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// HostPolicy decides which names a sandbox may reach through the proxy.
type HostPolicy interface {
	AllowsHost(name string, port uint16) bool // name lowercased, no trailing dot
}

// NamePolicy is an optional interface of a [HostPolicy] used by the
// [DNS] forwarder: a query for name is forwarded when AllowsName(name)
// is true. A HostPolicy that does not implement it allows the DNS query
// for name when it allows name on port 443 or on port 80.
type NamePolicy interface {
	AllowsName(name string) bool // name lowercased, no trailing dot
}

// IPPolicy is an optional interface of a [HostPolicy] for requests that
// name an IP literal (SOCKS5 ATYP IPv4/IPv6, CONNECT 192.0.2.1:443,
// http://[2001:db8::1]/). Without it, such requests are checked with
// AllowsHost on the address's canonical string form (netip.Addr.String),
// which a policy built only from host names never allows, so IP-literal
// requests are refused. Even when the policy allows an IP literal, the
// address guard still applies.
type IPPolicy interface {
	AllowsIP(addr netip.Addr, port uint16) bool
}

// Interceptor takes over the connections to the destinations it claims:
// the secret placeholders' TLS termination (gateway.Gateway). The proxy
// asks it before its policy: a claimed destination is reachable whatever
// the policy says, because the interceptor itself decides every request
// and dials only the destination it was configured with.
type Interceptor interface {
	// Intercepts reports whether connections to host:port are served by
	// the interceptor (host lowercased, no trailing dot).
	Intercepts(host string, port uint16) bool
	// Grants reports whether the sandbox may reach host:port whatever the
	// policy says (a secret placeholder's host). A host the interceptor
	// claims without granting it (a header rule's) is intercepted only
	// where the policy allows it.
	Grants(host string, port uint16) bool
	// ServeIntercepted serves client (a TLS client whose first bytes,
	// already read, are replay) until it is done, and closes it.
	ServeIntercepted(ctx context.Context, client net.Conn, replay []byte, host string, port uint16)
	// CheckPlain reports whether a plain-HTTP request head carries a
	// placeholder, which must never leave in clear (the proxy refuses the
	// request).
	CheckPlain(head []byte) bool
}

// Upstream is an operator SOCKS5 proxy that every tunnel is chained
// through. Its credentials arrive only by RPC: the proxy never logs
// them nor puts them in errors, and String, GoString and LogValue leave
// them out. Its address must pass [BlockedUpstreamHost] (the network
// service refuses it otherwise), and at every dial its host is resolved
// and each address guarded like a destination's (see [Proxy]).
type Upstream struct {
	Address  string // host:port of the SOCKS5 proxy
	Username string // RFC 1929 username/password authentication when either is set
	Password string
}

// String returns the upstream's address, without credentials.
func (u Upstream) String() string {
	if u.Username != "" || u.Password != "" {
		return "socks5://" + u.Address + " (with credentials)"
	}
	return "socks5://" + u.Address
}

// GoString is String, so that %#v does not print the credentials either.
func (u Upstream) GoString() string { return u.String() }

// LogValue keeps the credentials out of slog output.
func (u Upstream) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("credentials", u.Username != "" || u.Password != ""))
}

// Refusal reason classes, used in [Stats.Refused], in logs and as the
// body of the HTTP refusals.
const (
	ReasonNotAllowed      = "not_allowed"         // the policy does not allow the name (or IP) and port
	ReasonBlockedAddress  = "blocked_address"     // a resolved address failed the guard
	ReasonBadRequest      = "bad_request"         // malformed, oversized, unsupported or timed-out request
	ReasonResolveFailed   = "resolve_failed"      // the name did not resolve
	ReasonDialFailed      = "dial_failed"         // no guarded address (or the upstream) could be reached
	ReasonUpstreamBlocked = "upstream_blocked"    // the upstream's address is a localhost name or resolved to a guarded address
	ReasonMaxConns        = "max_conns"           // MaxConns connections were already being served
	ReasonPlaceholder     = "placeholder_blocked" // a plain-HTTP request carried a secret placeholder
)

// Default limits.
const (
	DefaultMaxConns         = 128
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultDialTimeout      = 10 * time.Second
)

// Options configure a [Proxy]. Every field has a working default; the
// functions exist so that tests never touch the network.
type Options struct {
	// Resolve resolves a host name. Default:
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial opens the proxy's outbound connections (to the guarded
	// address, or to the Upstream). Default: a net.Dialer with
	// DialTimeout.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// OriginalDst returns a connection's destination before it was
	// redirected to the proxy. An error, or the connection's own local
	// address, means "not redirected". Default: getsockopt
	// SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST on Linux.
	OriginalDst func(c net.Conn) (netip.AddrPort, error)
	// LocalAddrs returns the guest's own addresses, which are refused.
	// Default: the addresses of net.InterfaceAddrs.
	LocalAddrs func() []netip.Addr
	// MaxConns bounds the connections being served (handshakes and
	// tunnels); beyond it, new connections are closed at once.
	// Default DefaultMaxConns.
	MaxConns int
	// HandshakeTimeout bounds the time to receive a complete request
	// (or, for redirected connections, the first bytes carrying the
	// name) and to set up the tunnel. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// DialTimeout bounds the outbound dial, upstream handshake
	// included. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// Logger receives counts and reason classes only. Default
	// slog.Default().
	Logger *slog.Logger
}

// Stats is a snapshot of a [Proxy]'s counters.
type Stats struct {
	Conns       int               // connections being served (handshakes and tunnels)
	Tunnels     int               // established tunnels
	Tunneled    uint64            // tunnels established since New
	Intercepted uint64            // connections handed to the Interceptor since New
	Cut         uint64            // tunnels closed by SetPolicy
	Refused     map[string]uint64 // refused requests by reason class (Reason*)
}

// Proxy is rayd's egress proxy. One listening port serves four kinds of
// client, told apart in this order:
//
//  1. Transparent: Options.OriginalDst reports that the connection was
//     redirected (its original destination is not the proxy's own
//     address). If the original port is 443 or the first byte is 0x16
//     (a TLS handshake record), the name is the server_name of the TLS
//     ClientHello; otherwise it is the Host header of the HTTP request
//     head (origin-form target only; the Host header's port is
//     ignored). The name is checked for the original port, resolved by
//     the proxy (the original destination address is never dialed: it
//     is whatever the client chose), and the bytes read so far are
//     replayed to the origin. No name means refused; refusals close the
//     connection (TLS cannot be answered), except for HTTP which gets
//     the same 4xx/502 answer as below.
//  2. SOCKS5, first byte 0x05: the no-authentication method only,
//     CONNECT only, ATYP domain, IPv4 or IPv6. Refusals are SOCKS5
//     replies: 0x02 (not allowed by ruleset) for not_allowed and
//     blocked_address, 0x04 (host unreachable) for resolve_failed, 0x05
//     (connection refused) for dial_failed and upstream_blocked,
//     0x07/0x08 for an unsupported command/address type, 0x01 otherwise.
//  3. HTTP CONNECT host:port (first byte an upper-case letter and method
//     CONNECT), answered "HTTP/1.1 200 Connection established".
//  4. Absolute-form HTTP ("GET http://host[:port]/path HTTP/1.1", any
//     other method): forwarded to the origin in origin-form with the
//     Host header rewritten to the URL's authority, hop-by-hop and
//     Proxy-* headers removed and "Connection: close" added; one request
//     per connection, whose body (Content-Length or chunked) is
//     forwarded and nothing after it. https:// and origin-form targets
//     are answered 400.
//
// HTTP refusals (CONNECT, absolute-form and transparent HTTP) are
// "400 Bad Request" for bad_request, "403 Forbidden" for not_allowed and
// blocked_address, "502 Bad Gateway" for resolve_failed, dial_failed and
// upstream_blocked, each with the reason class as the whole body.
//
// Every request is, in this order: parsed strictly (heads and
// ClientHellos at most 16 KiB, names at most 253 bytes of letters,
// digits, '-', '_' and dots, ports 1-65535); checked against the policy
// (a denied name is never resolved); resolved;
// guarded: the request is refused if ANY resolved address (or the IP
// literal) is unspecified, loopback, link-local unicast (169.254.0.0/16,
// fe80::/10, hence the IMDS 169.254.169.254), the IPv6 IMDS
// fd00:ec2::254, multicast, in 0.0.0.0/8 or 240.0.0.0/4 (reserved and
// broadcast), one of Options.LocalAddrs, or has a zone; IPv4-mapped
// addresses (::ffff:a.b.c.d) are unmapped and guarded as IPv4, and every
// other IPv6 form embedding IPv4 — IPv4-compatible ::/96, SIIT
// ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
// 2002::/16, Teredo 2001::/32 — is refused outright; private ranges are
// not refused. Then it is dialed, trying
// the guarded addresses in order until one answers (through the
// Upstream when one is set, which is then given the guarded IP address,
// never the name; the Upstream's own host is resolved with
// Options.Resolve and refused, upstream_blocked, when it is a localhost
// name or ANY of its addresses fails the same guard, and otherwise its
// guarded addresses are dialed in order); re-checked against the policy
// in force at that moment; and spliced both ways with half-close.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	policy      HostPolicy
	upstream    *Upstream
	upWarned    bool // a blocked upstream was logged since SetPolicy
	interceptor Interceptor
	closed      bool
	listeners   map[net.Listener]struct{}
	conns       map[*proxyConn]struct{}
	refused     map[string]uint64
	tunneled    uint64
	intercepted uint64
	cut         uint64
}

// proxyConn is one client connection being served.
type proxyConn struct {
	client net.Conn
	// Set under Proxy.mu once the tunnel is established.
	origin net.Conn
	t      target
	tunnel bool
}

func (c *proxyConn) closeAll() {
	c.client.Close()
	if c.origin != nil {
		c.origin.Close()
	}
}

// New returns a Proxy with the given options (zero fields take their
// defaults). Its policy denies everything until SetPolicy.
func New(opts Options) *Proxy {
	if opts.Resolve == nil {
		opts.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.OriginalDst == nil {
		opts.OriginalDst = originalDst
	}
	if opts.LocalAddrs == nil {
		opts.LocalAddrs = interfaceAddrs
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		opts:      opts,
		log:       opts.Logger,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*proxyConn]struct{}{},
		refused:   map[string]uint64{},
	}
}

// ErrClosed is returned by Serve on a Proxy that was closed.
var ErrClosed = errors.New("egress: proxy closed")

// Serve accepts connections on ln until ln is closed (by the caller or
// by Close), then returns nil. It may be called for several listeners.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		p.mu.Lock()
		if p.closed || len(p.conns) >= p.opts.MaxConns {
			p.refused[ReasonMaxConns]++
			p.mu.Unlock()
			c.Close()
			p.log.Debug("egress: connection refused", "reason", ReasonMaxConns)
			continue
		}
		pc := &proxyConn{client: c}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.handle(pc)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close closes every listener given to Serve and every connection and
// tunnel, and waits for their handlers to return.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for ln := range p.listeners {
		ln.Close()
	}
	for c := range p.conns {
		c.closeAll()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// SetPolicy atomically replaces the policy and the upstream (nil policy:
// deny everything; nil upstream: dial directly), then closes every
// established tunnel that the new policy no longer allows. A request
// being set up when SetPolicy runs is re-checked against the new
// policy before its tunnel is established. The upstream applies to new
// tunnels only.
func (p *Proxy) SetPolicy(pol HostPolicy, upstream *Upstream) {
	var up *Upstream
	if upstream != nil {
		u := *upstream
		up = &u
	}
	p.mu.Lock()
	p.policy = pol
	p.upstream = up
	p.upWarned = false
	n := 0
	for c := range p.conns {
		if c.tunnel && !allows(pol, c.t) {
			c.closeAll()
			n++
		}
	}
	p.cut += uint64(n)
	p.mu.Unlock()
	p.log.Info("egress: policy set", "deny_all", pol == nil, "upstream", up != nil, "tunnels_cut", n)
}

// SetInterceptor sets (nil: removes) the interceptor asked before the
// policy for new connections.
func (p *Proxy) SetInterceptor(i Interceptor) {
	p.mu.Lock()
	p.interceptor = i
	p.mu.Unlock()
}

// interceptorFor returns the interceptor when it claims t (a name, not
// an IP literal) and the connection may go there: the interceptor grants
// it, or the policy allows the name (or, for a transparent connection,
// its original address dst; zero otherwise).
func (p *Proxy) interceptorFor(t target, dst netip.Addr) Interceptor {
	p.mu.Lock()
	i := p.interceptor
	p.mu.Unlock()
	if i == nil || t.host == "" || t.isIP || !i.Intercepts(t.host, t.port) {
		return nil
	}
	if i.Grants(t.host, t.port) {
		return i
	}
	pol, _ := p.current()
	if allows(pol, t) || dst.IsValid() && allows(pol, target{isIP: true, addr: dst, port: t.port}) {
		return i
	}
	return nil
}

// PlainAuditor is an Interceptor that also records where a placeholder
// seen in clear was going (the secret audit): CheckPlainTo is CheckPlain
// for a request to host:port ("" and 0 when not known).
type PlainAuditor interface {
	CheckPlainTo(head []byte, host string, port uint16) bool
}

// plainCarriesPlaceholder reports whether a plain-HTTP head to host:port
// carries a secret placeholder.
func (p *Proxy) plainCarriesPlaceholder(head []byte, host string, port uint16) bool {
	p.mu.Lock()
	i := p.interceptor
	p.mu.Unlock()
	if i == nil {
		return false
	}
	if a, ok := i.(PlainAuditor); ok {
		return a.CheckPlainTo(head, host, port)
	}
	return i.CheckPlain(head)
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Conns: len(p.conns), Tunneled: p.tunneled, Intercepted: p.intercepted, Cut: p.cut, Refused: make(map[string]uint64, len(p.refused))}
	for c := range p.conns {
		if c.tunnel {
			s.Tunnels++
		}
	}
	for k, v := range p.refused {
		s.Refused[k] = v
	}
	return s
}

// current returns the policy and upstream in force.
func (p *Proxy) current() (HostPolicy, *Upstream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.policy, p.upstream
}

// allows applies pol to t (see IPPolicy for IP literals).
func allows(pol HostPolicy, t target) bool {
	if pol == nil || t.port == 0 {
		return false
	}
	if t.isIP {
		if ip, ok := pol.(IPPolicy); ok {
			return ip.AllowsIP(t.addr, t.port)
		}
	}
	return pol.AllowsHost(t.host, t.port)
}
