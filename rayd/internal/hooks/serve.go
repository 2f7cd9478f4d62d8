package hooks

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/peercred"
)

// Timeouts of the http.Server that Serve runs, besides ReadHeaderTimeout.
const (
	readTimeout  = 30 * time.Second
	writeTimeout = 30 * time.Second
	idleTimeout  = 60 * time.Second
)

// peer is what the server knows about the client of a connection.
type peer struct {
	caller Caller
	uid    int64  // -1 when unknown
	lookup string // how the caller was decided, for logs: "uid", "outside", "not_found", "owner_gone", "error", "no_addr"
}

type peerKey struct{}

// identify classifies the client of a connection from its addresses.
func (s *Server) identify(local, remote net.Addr) peer {
	if local == nil || remote == nil {
		return peer{CallerUnknown, -1, "no_addr"}
	}
	o, err := s.peerOwner(local, remote)
	switch {
	case err == nil && (o.UID < SandboxUIDMin || int64(o.UID) == s.selfUID):
		// rayd's own uid is the platform too: an unprivileged rayd (the
		// local platform without root) shares it with the platform, and a
		// process with rayd's uid could do anything rayd does anyway.
		return peer{CallerPlatform, int64(o.UID), "uid"}
	case err == nil:
		return peer{CallerSandbox, int64(o.UID), "uid"}
	case errors.Is(err, peercred.ErrOwnerGone):
		return peer{CallerUnknown, -1, "owner_gone"}
	case errors.Is(err, peercred.ErrNotFound):
		if s.outsideNamespace(local, remote) {
			// The client socket is in another network namespace: the
			// platform calling over a veth or from the host.
			return peer{CallerPlatform, -1, "outside"}
		}
		// A client of this namespace whose socket is gone already (for
		// example reset right after sending its request).
		return peer{CallerUnknown, -1, "not_found"}
	default:
		s.log.Warn("hooks: peer lookup failed", slog.String("error", err.Error()))
		return peer{CallerUnknown, -1, "error"}
	}
}

// identifyConn classifies the client of a connection being accepted.
func (s *Server) identifyConn(c net.Conn) peer {
	if uc, ok := c.(*net.UnixConn); ok {
		return s.identifyUnix(uc)
	}
	if s.overUnix {
		// The platform calls over Unix only: a TCP client is sandbox
		// code, whose uid may well be rayd's own.
		return peer{CallerSandbox, -1, "tcp"}
	}
	return s.identify(c.LocalAddr(), c.RemoteAddr())
}

// identifyUnix classifies the client of a Unix connection: the platform
// when it is outside rayd's pid namespace (its SO_PEERCRED pid reads 0
// here), sandbox code when rayd can see it.
func (s *Server) identifyUnix(c *net.UnixConn) peer {
	pid, uid, err := s.unixPeer(c)
	switch {
	case err != nil:
		s.log.Warn("hooks: peer credentials failed", slog.String("error", err.Error()))
		return peer{CallerUnknown, -1, "error"}
	case pid == 0:
		return peer{CallerPlatform, int64(uid), "outside_pidns"}
	default:
		return peer{CallerSandbox, int64(uid), "pidns"}
	}
}

// outsideNamespace reports whether remote cannot belong to a socket of this
// network namespace: it is not loopback, not the connection's own local
// address and not assigned to any interface here. Sandbox code cannot take
// an address it does not have (it has no CAP_NET_ADMIN), and a connection
// from a non-local address it binds anyway cannot complete its handshake.
// When the namespace's addresses cannot be listed it reports false.
func (s *Server) outsideNamespace(local, remote net.Addr) bool {
	r, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return false
	}
	ip := r.Addr().Unmap().WithZone("")
	if ip.IsLoopback() || ip.IsUnspecified() {
		return false
	}
	if l, err := netip.ParseAddrPort(local.String()); err != nil || l.Addr().Unmap().WithZone("") == ip {
		return false
	}
	addrs, err := s.localAddrs()
	if err != nil {
		s.log.Warn("hooks: listing interface addresses failed", slog.String("error", err.Error()))
		return false
	}
	for _, a := range addrs {
		if a.Unmap().WithZone("") == ip {
			return false
		}
	}
	return true
}

// interfaceAddrs lists the addresses of this network namespace.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if x, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, x.Unmap())
		}
	}
	return out, nil
}

// connContext stores the caller of c, identified when it was accepted, in
// the connection's context.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	var p peer
	if lc, ok := c.(*limitedConn); ok {
		p = lc.peer
	} else {
		p = s.identifyConn(c)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// peerOf returns the caller of r: the one stored at accept, or else one
// identified now from the request's addresses.
func (s *Server) peerOf(r *http.Request) peer {
	if p, ok := r.Context().Value(peerKey{}).(peer); ok {
		return p
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if s.overUnix {
		if _, ok := local.(*net.TCPAddr); ok {
			return peer{CallerSandbox, -1, "tcp"}
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if local == nil || err != nil {
		return peer{CallerUnknown, -1, "no_addr"}
	}
	return s.identify(local, net.TCPAddrFromAddrPort(ap))
}

// Serve serves the hooks on ln until ctx is cancelled, then shuts down
// gracefully, waiting up to ShutdownTimeout for calls in progress, and
// returns nil (or the shutdown error). It returns early with the error of a
// failing listener. Serve closes ln.
//
// The server speaks HTTP/1.1 only, with the read-header timeout of the
// Options, 30 s read and write timeouts, a 60 s idle timeout and 16 KiB of
// headers. At most MaxConns connections are open at once; connections over
// the cap are closed as soon as they are accepted. Connections whose caller
// is not the platform may only use half of the cap (at least one), so that
// sandbox code holding connections open cannot lock the platform out.
//
// Each connection's caller is identified once, when it is accepted. ln may
// be a TCP or a Unix listener (see the package documentation for how their
// callers are told apart); a Server may serve several listeners at once,
// each with its own connection cap.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.readHeader,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       s.connContext,
		Protocols:         &protocols,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	lim := newLimitListener(ln, s)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lim) }()
	select {
	case err := <-errc:
		srv.Close() // the listener failed: drop the connections still open
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	<-errc // http.ErrServerClosed
	return err
}

// limitListener caps the number of open connections and identifies the
// caller of each connection it lets through.
type limitListener struct {
	net.Listener
	s        *Server
	all      chan struct{} // one token per open connection
	untrusty chan struct{} // one token per open connection whose caller is not the platform
	rejected atomic.Uint64 // connections closed at accept
}

func newLimitListener(ln net.Listener, s *Server) *limitListener {
	n := s.maxConns / 2
	if n < 1 {
		n = 1
	}
	return &limitListener{
		Listener: ln,
		s:        s,
		all:      make(chan struct{}, s.maxConns),
		untrusty: make(chan struct{}, n),
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.all <- struct{}{}:
		default:
			c.Close()
			if n := l.rejected.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... only
				l.s.log.Warn("hooks: connection closed at accept: too many connections",
					slog.Int("max_conns", l.s.maxConns), slog.Uint64("closed_so_far", n))
			}
			continue
		}
		lc := &limitedConn{Conn: c, l: l, peer: l.s.identifyConn(c)}
		if lc.peer.caller != CallerPlatform {
			select {
			case l.untrusty <- struct{}{}:
				lc.untrusty = true
			default:
				<-l.all
				c.Close()
				if n := l.rejected.Add(1); n&(n-1) == 0 {
					l.s.log.Warn("hooks: connection closed at accept: too many connections not from the platform",
						slog.String("caller", string(lc.peer.caller)), slog.Int64("uid", lc.peer.uid), slog.Uint64("closed_so_far", n))
				}
				continue
			}
		}
		return lc, nil
	}
}

// limitedConn gives its tokens back when closed.
type limitedConn struct {
	net.Conn
	l        *limitListener
	peer     peer
	untrusty bool
	once     sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.untrusty {
			<-c.l.untrusty
		}
		<-c.l.all
	})
	return err
}
