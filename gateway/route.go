package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// routeState is one running route: its listener and port survive a
// refresh; its configuration is swapped atomically.
type routeState struct {
	g      *Gateway
	name   string
	port   uint16
	ln     net.Listener
	srv    *http.Server
	bucket *bucket
	rt     atomic.Pointer[routeRuntime]

	requests atomic.Uint64
	refused  atomic.Uint64
	lastErr  atomic.Pointer[string]
}

type routeRuntime struct {
	cfg      *routeConfig
	up       *upstream
	dropResp []string
}

func (rs *routeState) fail(class string) {
	rs.refused.Add(1)
	c := class
	rs.lastErr.Store(&c)
	rs.g.log.Info("gateway: route request refused", "route", rs.name, "class", class)
}

func (rs *routeState) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := rs.rt.Load()
	rs.requests.Add(1)
	uri := r.RequestURI
	// Origin-form only: absolute-form, authority-form and "*" are refused.
	if !strings.HasPrefix(uri, "/") {
		rs.fail(ClassNotAllowed)
		refuse(w, ClassNotAllowed, 0)
		return
	}
	rawPath, _, _ := strings.Cut(uri, "?")
	decoded, err := decodePath(rawPath)
	if err != nil {
		rs.fail(ClassNotAllowed)
		refuse(w, ClassNotAllowed, 0)
		return
	}
	if !matchRules(rt.cfg.rules, r.Method, decoded) {
		rs.fail(ClassNotAllowed)
		refuse(w, ClassNotAllowed, 0)
		return
	}
	if ok, retry := rs.bucket.take(); !ok {
		rs.fail(ClassRateLimited)
		refuse(w, ClassRateLimited, retry)
		return
	}
	rs.g.forward(w, r, &fwd{
		up:       rt.up,
		setPath:  true,
		path:     decoded,
		rawPath:  rawPath,
		inject:   rt.cfg.headers,
		dropResp: rt.dropResp,
		scrub:    rt.cfg.scrubVal,
		fail:     rs.fail,
		sent:     func() { rs.g.auditHeaders(AuditRoute, rt.cfg.name, rt.cfg.headers, rt.cfg.host, rt.cfg.port) },
	})
}

// SetRoutes replaces the set of routes. Everything is validated first; on
// error the previous set keeps running unchanged. A route with the same name
// as before keeps its listener and port and gets the new values, rules and
// rate atomically; removed routes close their listener and connections; new
// routes listen on a fresh loopback port.
func (g *Gateway) SetRoutes(routes []Route) error {
	cfgs, err := validateRoutes(routes)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	// Open the listeners of new routes first, so a failure changes nothing.
	fresh := map[string]*routeState{}
	for i, c := range cfgs {
		if g.routes[c.name] != nil {
			continue
		}
		ln, err := g.opts.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			if _, ok := ln.Addr().(*net.TCPAddr); !ok {
				ln.Close()
				err = fmt.Errorf("not a TCP listener")
			}
		}
		if err != nil {
			for _, rs := range fresh {
				rs.ln.Close()
			}
			return fmt.Errorf("gateway: routes[%d]: listen: %w", i, err)
		}
		rs := &routeState{
			g:      g,
			name:   c.name,
			port:   uint16(ln.Addr().(*net.TCPAddr).Port),
			ln:     &limitListener{Listener: ln, sem: make(chan struct{}, maxClientConnsPerRoute)},
			bucket: newBucket(g.opts.Now, c.rate),
		}
		rs.srv = &http.Server{
			Handler:           rs,
			ReadHeaderTimeout: clientHeaderTimeout,
			IdleTimeout:       clientIdleTimeout,
			MaxHeaderBytes:    maxRequestHeaderBytes,
			ErrorLog:          discardLog,
			BaseContext:       func(net.Listener) context.Context { return g.ctx },
		}
		fresh[c.name] = rs
	}
	// Commit.
	next := make(map[string]*routeState, len(cfgs))
	for _, c := range cfgs {
		drop := make([]string, 0, len(c.headers))
		for _, h := range c.headers {
			drop = append(drop, h.name)
		}
		if rs := fresh[c.name]; rs != nil {
			rs.rt.Store(&routeRuntime{cfg: c, up: g.newUpstream(c.host, c.port), dropResp: drop})
			next[c.name] = rs
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				_ = rs.srv.Serve(rs.ln)
			}()
			continue
		}
		rs := g.routes[c.name]
		old := rs.rt.Load()
		up := old.up
		if up.host != c.host || up.port != c.port {
			up = g.newUpstream(c.host, c.port)
			g.retireTransport(old.up.transport)
		}
		rs.bucket.setRate(c.rate)
		rs.rt.Store(&routeRuntime{cfg: c, up: up, dropResp: drop})
		next[c.name] = rs
	}
	for name, rs := range g.routes {
		if next[name] != nil {
			continue
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			// Closes the listener and idle connections, then waits for
			// in-flight requests (until Close cancels them).
			up := rs.rt.Load().up
			up.transport.CloseIdleConnections()
			_ = rs.srv.Shutdown(g.ctx)
			rs.srv.Close()
			g.retireTransport(up.transport)
		}()
	}
	g.routes = next
	g.log.Info("gateway: routes set", "routes", len(next))
	return nil
}

// limitListener closes connections beyond its capacity right away.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, sem: l.sem}, nil
		default:
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.sem })
	return err
}
