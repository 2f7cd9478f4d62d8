package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

type hostPort struct {
	host string
	port uint16
}

// phState is the status of one placeholder name; it survives a
// SetPlaceholders that keeps the name.
type phState struct {
	name     string
	bucket   *bucket
	injected atomic.Uint64
	blocked  atomic.Uint64
	lastErr  atomic.Pointer[string]
}

func (s *phState) setClass(g *Gateway, class string) {
	c := class
	s.lastErr.Store(&c)
	g.log.Info("gateway: placeholder request refused", "placeholder", s.name, "class", class)
}

type phEntry struct {
	cfg *placeholderConfig
	st  *phState
}

// phSet is an immutable set of placeholders.
type phSet struct {
	list  []*phEntry
	hosts map[hostPort][]string // secrets (len >= 8) of the placeholders of a host
}

func normHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// SetPlaceholders replaces the set of placeholders, with the same
// all-or-nothing semantics as SetRoutes. Counters survive for names kept.
func (g *Gateway) SetPlaceholders(ps []Placeholder) error {
	cfgs, err := validatePlaceholders(ps)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	set := &phSet{hosts: map[hostPort][]string{}}
	states := make(map[string]*phState, len(cfgs))
	for _, c := range cfgs {
		st := g.phStates[c.name]
		if st == nil {
			st = &phState{name: c.name, bucket: newBucket(g.opts.Now, c.rate)}
		} else {
			st.bucket.setRate(c.rate)
		}
		states[c.name] = st
		set.list = append(set.list, &phEntry{cfg: c, st: st})
		hp := hostPort{c.host, c.port}
		sec := set.hosts[hp]
		if len(c.secret) >= minScrubSecretSize {
			sec = append(sec, c.secret)
		}
		set.hosts[hp] = sec
	}
	g.phStates = states
	g.phs.Store(set)
	g.pruneUpstreams()
	g.log.Info("gateway: placeholders set", "placeholders", len(set.list))
	return nil
}

// SetHeaderRules replaces the header rules, all or nothing: bad input is
// a *ConfigError naming the field (never a value) and changes nothing.
func (g *Gateway) SetHeaderRules(rs []HeaderRule) error {
	cfgs, err := validateHeaderRules(rs)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.hrs.Store(&cfgs)
	g.pruneUpstreams()
	g.log.Info("gateway: header rules set", "rules", len(cfgs))
	return nil
}

// pruneUpstreams drops the upstreams of hosts no longer intercepted.
func (g *Gateway) pruneUpstreams() {
	g.upMu.Lock()
	var gone []*upstream
	for hp, u := range g.upstreams {
		if !g.Intercepts(hp.host, hp.port) {
			gone = append(gone, u)
			delete(g.upstreams, hp)
		}
	}
	g.upMu.Unlock()
	for _, u := range gone {
		g.retireTransport(u.transport)
	}
}

// Intercepts reports whether some placeholder has this host and port, or
// a header rule matches them (host compared lower-case with a trailing
// dot stripped; port 0 = 443).
func (g *Gateway) Intercepts(host string, port uint16) bool {
	if port == 0 {
		port = 443
	}
	host = normHost(host)
	if _, ok := g.phs.Load().hosts[hostPort{host, port}]; ok {
		return true
	}
	return matchHeaderRule(*g.hrs.Load(), host, port) != nil
}

// Grants reports whether a placeholder has this host and port: the
// sandbox may reach it whatever its network policy says. A header rule
// alone grants nothing.
func (g *Gateway) Grants(host string, port uint16) bool {
	if port == 0 {
		port = 443
	}
	_, ok := g.phs.Load().hosts[hostPort{normHost(host), port}]
	return ok
}

// CheckPlain reports whether a plain-HTTP request head carries any
// placeholder (also inside Basic credentials); each one found is counted as
// Blocked.
func (g *Gateway) CheckPlain(head []byte) bool { return len(g.checkPlain(head)) > 0 }

// checkPlain is CheckPlain, returning the placeholders found.
func (g *Gateway) checkPlain(head []byte) []*phEntry {
	set := g.phs.Load()
	if len(set.list) == 0 {
		return nil
	}
	var decoded [][]byte
	lines := [][]byte(nil)
	if containsFold(head, "authorization") {
		// Only then can Basic credentials hide a placeholder.
		lines = bytes.Split(head, []byte("\n"))
	}
	for _, line := range lines {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !strings.EqualFold(string(bytes.TrimSpace(name)), "authorization") {
			continue
		}
		if d, ok := decodeBasic(string(bytes.TrimSpace(value))); ok {
			decoded = append(decoded, []byte(d))
		}
	}
	var found []*phEntry
	for _, e := range set.list {
		hit := bytes.Contains(head, []byte(e.cfg.token))
		for _, d := range decoded {
			hit = hit || bytes.Contains(d, []byte(e.cfg.token))
		}
		if hit {
			found = append(found, e)
			e.st.blocked.Add(1)
			e.st.setClass(g, ClassBlocked)
		}
	}
	return found
}

// containsFold reports whether b contains sub (lower-case ASCII) in any
// case.
func containsFold(b []byte, sub string) bool {
	for i := 0; len(b)-i >= len(sub); {
		j := bytes.IndexAny(b[i:len(b)-len(sub)+1], sub[:1]+strings.ToUpper(sub[:1]))
		if j < 0 {
			return false
		}
		i += j
		if bytes.EqualFold(b[i:i+len(sub)], []byte(sub)) {
			return true
		}
		i++
	}
	return false
}

// decodeBasic returns the decoded credentials of a "Basic" Authorization
// value.
func decodeBasic(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// findPlaceholders returns every placeholder occurring in the request line,
// the Host or any header value (also inside Basic credentials).
func (set *phSet) find(r *http.Request) []*phEntry {
	var found []*phEntry
	for _, e := range set.list {
		t := e.cfg.token
		hit := strings.Contains(r.RequestURI, t) || strings.Contains(r.Host, t) || strings.Contains(r.Method, t)
		for k, vv := range r.Header {
			if hit {
				break
			}
			for _, v := range vv {
				if strings.Contains(v, t) {
					hit = true
					break
				}
				if k == "Authorization" {
					if d, ok := decodeBasic(v); ok && strings.Contains(d, t) {
						hit = true
						break
					}
				}
			}
		}
		if hit {
			found = append(found, e)
		}
	}
	return found
}

// replaceHeaders substitutes the secrets of found in every header value
// (re-encoding Basic credentials). It returns the canonical names of the
// headers changed and the entries actually substituted.
func replaceHeaders(h http.Header, found []*phEntry) (names []string, used map[*phEntry]bool) {
	used = map[*phEntry]bool{}
	for k, vv := range h {
		changed := false
		for i, v := range vv {
			nv := v
			if k == "Authorization" {
				if d, ok := decodeBasic(v); ok {
					nd := d
					for _, e := range found {
						if strings.Contains(nd, e.cfg.token) {
							nd = strings.ReplaceAll(nd, e.cfg.token, e.cfg.secret)
							used[e] = true
						}
					}
					if nd != d {
						scheme, _, _ := strings.Cut(strings.TrimSpace(v), " ")
						nv = scheme + " " + base64.StdEncoding.EncodeToString([]byte(nd))
					}
				}
			}
			for _, e := range found {
				if strings.Contains(nv, e.cfg.token) {
					nv = strings.ReplaceAll(nv, e.cfg.token, e.cfg.secret)
					used[e] = true
				}
			}
			if nv != v {
				vv[i] = nv
				changed = true
			}
		}
		if changed {
			names = append(names, k)
		}
	}
	return names, used
}

func (g *Gateway) upstreamFor(host string, port uint16) *upstream {
	hp := hostPort{host, port}
	g.upMu.Lock()
	u := g.upstreams[hp]
	g.upMu.Unlock()
	if u != nil {
		return u
	}
	nu := g.newUpstream(host, port)
	g.upMu.Lock()
	defer g.upMu.Unlock()
	if prev := g.upstreams[hp]; prev != nil {
		delete(g.transports, nu.transport)
		return prev
	}
	g.upstreams[hp] = nu
	return nu
}

// interceptHandler serves the requests of one intercepted connection.
type interceptHandler struct {
	g    *Gateway
	host string
	port uint16
}

func (h *interceptHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := h.g
	set := g.phs.Load()
	found := set.find(r)
	scrub := set.hosts[hostPort{h.host, h.port}]
	// A header rule's headers replace the request's own, after the
	// placeholders are replaced.
	var inject []injected
	if hr := matchHeaderRule(*g.hrs.Load(), h.host, h.port); hr != nil {
		inject = hr.headers
		scrub = append(slices.Clip(scrub), hr.scrub...)
	}
	if len(found) == 0 {
		// No placeholder: forwarded with the rule's headers, else
		// unchanged (origin-form only).
		if !strings.HasPrefix(r.RequestURI, "/") {
			refuse(w, ClassBadRequest, 0)
			return
		}
		g.forward(w, r, &fwd{up: g.upstreamFor(h.host, h.port), scrub: scrub, inject: inject,
			sent: func() { g.auditHeaders(AuditHeaderRule, "", inject, h.host, h.port) }})
		return
	}
	blocked := false
	for _, e := range found {
		if e.cfg.host != h.host || e.cfg.port != h.port {
			e.st.blocked.Add(1)
			e.st.setClass(g, ClassBlocked)
			g.audit(auditKey{mech: AuditPlaceholder, name: e.cfg.name, host: h.host, port: h.port, outcome: AuditWrongHost})
			blocked = true
		}
	}
	if blocked {
		refuse(w, ClassBlocked, 0)
		return
	}
	failAll := func(class string) {
		for _, e := range found {
			e.st.setClass(g, class)
		}
	}
	uri := r.RequestURI
	if !strings.HasPrefix(uri, "/") {
		failAll(ClassNotAllowed)
		refuse(w, ClassNotAllowed, 0)
		return
	}
	rawPath, _, _ := strings.Cut(uri, "?")
	decoded, err := decodePath(rawPath)
	if err != nil {
		failAll(ClassNotAllowed)
		refuse(w, ClassNotAllowed, 0)
		return
	}
	for _, e := range found {
		if e.cfg.rules != nil && !matchRules(e.cfg.rules, r.Method, decoded) {
			e.st.setClass(g, ClassNotAllowed)
			refuse(w, ClassNotAllowed, 0)
			return
		}
	}
	for _, e := range found {
		if ok, retry := e.st.bucket.take(); !ok {
			e.st.setClass(g, ClassRateLimited)
			refuse(w, ClassRateLimited, retry)
			return
		}
	}
	f := &fwd{
		up:      g.upstreamFor(h.host, h.port),
		setPath: true,
		path:    decoded,
		rawPath: rawPath,
		scrub:   scrub,
		inject:  inject,
		fail:    failAll,
	}
	f.rewrite = func(hd http.Header) {
		names, used := replaceHeaders(hd, found)
		f.dropResp = names
		for e := range used {
			e.st.injected.Add(1)
			g.audit(auditKey{mech: AuditPlaceholder, name: e.cfg.name, host: h.host, port: h.port, outcome: AuditSent})
		}
	}
	f.sent = func() { g.auditHeaders(AuditHeaderRule, "", inject, h.host, h.port) }
	g.forward(w, r, f)
}

// replayConn reads replay before the connection.
type replayConn struct {
	net.Conn
	replay []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(p, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	addr net.Addr
	mu   sync.Mutex
	used bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.conn, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }

// ServeIntercepted serves one client connection the egress proxy redirected
// or CONNECTed to host:port. replay holds bytes already read from the client
// (the start of the TLS ClientHello). It terminates TLS with a leaf
// certificate for host signed by the CA, serves HTTP/1.1 requests until the
// client closes, ctx ends or the gateway is closed, and returns after
// closing client.
func (g *Gateway) ServeIntercepted(ctx context.Context, client net.Conn, replay []byte, host string, port uint16) {
	defer client.Close()
	host = normHost(host)
	if port == 0 {
		port = 443
	}
	if !isDNSName(host) {
		return
	}
	leaf, err := g.ca.leaf(host)
	if err != nil {
		return
	}
	tconn := tls.Server(&replayConn{Conn: client, replay: replay}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
		Time:         g.opts.Now,
	})
	ln := &oneConnListener{conn: tconn, done: make(chan struct{}), addr: client.LocalAddr()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	srv := &http.Server{
		Handler:           &interceptHandler{g: g, host: host, port: port},
		ReadHeaderTimeout: clientHeaderTimeout,
		IdleTimeout:       clientIdleTimeout,
		MaxHeaderBytes:    maxRequestHeaderBytes,
		ErrorLog:          discardLog,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.Close()
			}
		},
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.wg.Add(1)
	g.upMu.Lock()
	g.inter[srv] = client
	g.upMu.Unlock()
	g.mu.Unlock()
	defer g.wg.Done()
	// Closing the raw connection first keeps srv.Close from waiting on a
	// close_notify write that a stalled client never reads.
	stopSrv := context.AfterFunc(ctx, func() {
		client.Close()
		srv.Close()
	})
	_ = srv.Serve(ln)
	stopSrv()
	srv.Close()
	g.upMu.Lock()
	delete(g.inter, srv)
	g.upMu.Unlock()
}
