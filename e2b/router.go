package e2b

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/gateway/duplex"
	"github.com/rayito-dev/rayito/proto/limits"
)

// The E2B ports rayd serves inside every sandbox.
const (
	EnvdPort = limits.E2BEnvdPort
	CodePort = limits.E2BCodePort
	// hooksPort is the platform's lifecycle hooks port: never forwarded.
	hooksPort = limits.HooksPort
	// apiPort is rayd's own API port (the runtime contract's, as on AWS
	// Lambda MicroVMs): no program of the sandbox can serve it, and E2B's
	// SDKs never need it.
	apiPort = limits.DefaultAPIPort
)

// Routing headers E2B's SDKs send to E2B_SANDBOX_URL.
const (
	headerSandboxID    = "E2b-Sandbox-Id"
	headerSandboxPort  = "E2b-Sandbox-Port"
	headerTraffic      = "E2b-Traffic-Access-Token"
	headerAccessToken  = "X-Access-Token"
	stateCheckInterval = 5 * time.Second
)

// conn is a connected sandbox the router forwards to.
type conn struct {
	sbx     sandbox
	mu      sync.Mutex
	proxies map[int]*httputil.ReverseProxy
	checked time.Time // when the platform last said it runs
}

// sandboxTarget says whether r is for a sandbox, and which: the
// E2b-Sandbox-Id header (port from E2b-Sandbox-Port, else envd's), or a
// Host "<port>-<id>.<domain>".
func sandboxTarget(r *http.Request) (id string, port string, ok bool) {
	if id := r.Header.Get(headerSandboxID); id != "" {
		port := r.Header.Get(headerSandboxPort)
		if port == "" {
			port = strconv.Itoa(EnvdPort)
		}
		return id, port, true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, ok := strings.Cut(host, ".")
	if !ok || rest == "" {
		return "", "", false
	}
	port, id, ok = strings.Cut(label, "-")
	if !ok || port == "" || id == "" {
		return "", "", false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", "", false
		}
	}
	return id, port, true
}

// signedTarget finds the sandbox of a presigned file link that names
// none (E2B's SDKs make their links on E2B_SANDBOX_URL when it is set:
// the gateway's own address, without a sandbox header or host): the
// connected sandbox whose access token made its signature, if any.
func (s *Server) signedTarget(r *http.Request) (string, bool) {
	if r.URL.Path != "/files" || !r.URL.Query().Has("signature") || r.Header.Get("X-Api-Key") != "" {
		return "", false
	}
	s.mu.Lock()
	conns := make(map[string]*conn, len(s.conns))
	maps.Copy(conns, s.conns)
	s.mu.Unlock()
	now := time.Now()
	for id, c := range conns {
		// Expired counts: the sandbox then answers as envd does.
		if check := checkFileSignature(r, c.sbx.AccessToken(), now); check == sigValid || check == sigExpired {
			return id, true
		}
	}
	return "", false
}

func (s *Server) addConn(id string, sbx sandbox) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conns[id]; c != nil {
		return c
	}
	c := &conn{sbx: sbx, proxies: map[int]*httputil.ReverseProxy{}, checked: time.Now()}
	if !s.closed {
		s.conns[id] = c
	}
	return c
}

// dropConn forgets the connection (a pause, a resume: the sandbox's
// endpoint may change), not the record.
func (s *Server) dropConn(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, id)
}

// connFor returns the connected sandbox id, connecting it with the token
// from the token store when the gateway holds none.
func (s *Server) connFor(ctx context.Context, id string) (*conn, error) {
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	sbx, err := s.plat.connect(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.addConn(id, sbx), nil
}

// E2B's proxy messages, which programs and E2B's own tests compare.
const (
	msgSandboxNotFound = "The sandbox was not found"
	msgTrafficMissing  = "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing"
	msgTrafficInvalid  = "Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid"
)

// routeErrorBody is the shape of the router's own answers (not the
// sandbox's): E2B's proxy's {sandboxId, message, code}, and the
// gateway's reason, which says more than E2B's fixed message.
type routeErrorBody struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
	Reason    string `json:"reason,omitempty"`
}

// gone answers 502, which E2B's SDKs read as "the sandbox is not running"
// (isRunning() false), with E2B's proxy's body.
func gone(w http.ResponseWriter, id, why string) {
	writeJSON(w, http.StatusBadGateway, routeErrorBody{SandboxID: id, Message: msgSandboxNotFound,
		Code: http.StatusBadGateway, Reason: fmt.Sprintf("sandbox %q %s", id, why)})
}

// route forwards a request to a port of a sandbox.
func (s *Server) route(w http.ResponseWriter, r *http.Request, id, portStr string) {
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "invalid sandbox port")
		return
	}
	if port == hooksPort {
		writeError(w, http.StatusForbidden, "port 9000 is the platform's lifecycle hooks port: it is never reachable")
		return
	}
	if port == apiPort {
		writeError(w, http.StatusForbidden, "port 8080 is the sandbox daemon's own API port (Rayito's runtime contract): a program in a Rayito sandbox cannot serve it (it is in use), so Rayito's E2B gateway does not route it; serve another port")
		return
	}
	debug := false
	if id == DebugSandboxID {
		if s.opts.DebugSandboxID == "" {
			gone(w, id, "is not configured on this gateway (debug mode needs its debug sandbox id)")
			return
		}
		id, debug = s.opts.DebugSandboxID, true
	}
	if !validID(id) {
		writeError(w, http.StatusBadRequest, "invalid sandbox id")
		return
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.sandbox = id
	}
	ctx := r.Context()
	c, ok := s.routeConn(ctx, w, r, id)
	if !ok {
		return
	}
	token := c.sbx.AccessToken()
	addToken, ok := s.routeAccess(w, r, id, port, token, debug)
	if !ok {
		return
	}
	proxy, err := c.proxy(s, id, port)
	if err != nil {
		writeError(w, http.StatusBadGateway, "cannot reach the sandbox's port")
		return
	}
	out := r.Clone(ctx)
	for _, h := range []string{headerSandboxID, headerSandboxPort, headerTraffic, "X-Api-Key", "X-Aws-Proxy-Auth", "X-Aws-Proxy-Port", "X-Aws-Proxy-Force-H2"} {
		out.Header.Del(h)
	}
	if addToken {
		out.Header.Set(headerAccessToken, token)
	}
	// In full duplex: without it the server consumes and closes the body
	// when the sandbox's answer starts first (a streaming call answers at
	// once), so the transport, still reading the body to its end, fails
	// to write the request and drops the upstream connection (the client
	// saw its answer cut, now and then under load). Through
	// duplex.Forward, so that no body is read after this handler returns
	// (net/http panics on that, in a goroutine nothing recovers).
	duplex.Forward(w, out, proxy)
}

// routeConn is the connection to sandbox id, with the platform asked
// whether it runs on every health probe (isRunning reads 502 as gone) and
// otherwise every few seconds; a paused sandbox of autoResume is resumed.
// When the sandbox is not there to route to, it answers w and is false.
func (s *Server) routeConn(ctx context.Context, w http.ResponseWriter, r *http.Request, id string) (*conn, bool) {
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c == nil || r.URL.Path == "/health" || time.Since(c.checkedAt()) > stateCheckInterval {
		info, err := s.plat.getInfo(ctx, id)
		switch {
		case err != nil || isEnded(info.State):
			s.forget(id)
			gone(w, id, "is not running")
			return nil, false
		case isPaused(info.State):
			rec := s.recordOf(id)
			if rec == nil || !rec.autoResume {
				gone(w, id, "is paused")
				return nil, false
			}
			rctx, cancel := context.WithTimeout(ctx, createTimeout)
			err := s.plat.resume(rctx, id)
			cancel()
			if err != nil {
				gone(w, id, "is paused and did not resume")
				return nil, false
			}
			s.dropConn(id)
			c = nil
		}
		if c == nil {
			if c, err = s.connFor(ctx, id); err != nil {
				code, msg := statusOf(id, err)
				if code == http.StatusNotFound {
					gone(w, id, "is not running")
					return nil, false
				}
				writeError(w, code, msg)
				return nil, false
			}
			s.learn(ctx, info)
		}
		c.markChecked()
	}
	return c, true
}

// routeAccess checks that the request may reach port (the traffic token
// unless the sandbox is public or in debug mode; a presigned file URL's
// signature) and whether the sandbox's access token is to be added. When
// it may not, it answers w and is false.
func (s *Server) routeAccess(w http.ResponseWriter, r *http.Request, id string, port int, token string, debug bool) (addToken, ok bool) {
	rec := s.recordOf(id)
	secure, public := true, false
	if rec != nil {
		secure, public = rec.secure, rec.public
	}
	traffic := r.Header.Get(headerTraffic)
	switch port {
	case EnvdPort:
		// A presigned file URL (uploadUrl, downloadUrl) carries a
		// signature instead of the token: the router, which holds the
		// token, checks it and answers a bad one as envd does.
		if r.Header.Get(headerAccessToken) == "" {
			switch {
			case debug || !secure:
				addToken = true
			default:
				switch checkFileSignature(r, token, time.Now()) {
				case sigValid:
					addToken = true
				case sigInvalid:
					writeError(w, http.StatusUnauthorized, msgInvalidSignature)
					return false, false
				case sigExpired:
					writeError(w, http.StatusUnauthorized, msgExpiredSignature)
					return false, false
				}
			}
		}
	case CodePort:
		// The code interpreter's /contexts carries no X-Access-Token but
		// the traffic token.
		addToken = r.Header.Get(headerAccessToken) == "" && (debug || !secure || validTraffic(traffic, id, token))
	default:
		// Debug mode's sandbox is open to whoever reaches the gateway.
		if !public && !debug && !validTraffic(traffic, id, token) {
			msg := msgTrafficInvalid
			if traffic == "" {
				msg = msgTrafficMissing
			}
			writeJSON(w, http.StatusForbidden, routeErrorBody{SandboxID: id, Message: msg, Code: http.StatusForbidden,
				Reason: fmt.Sprintf("sandbox %q accepts traffic only with its E2B-Traffic-Access-Token (allowPublicTraffic is false)", id)})
			return false, false
		}
	}
	return addToken, true
}

func (c *conn) checkedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

func (c *conn) markChecked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = time.Now()
}

// proxy is the reverse proxy to one port: it streams both ways without
// buffering (FlushInterval -1).
func (c *conn) proxy(s *Server, id string, port int) (*httputil.ReverseProxy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.proxies[port]; p != nil {
		return p, nil
	}
	base, rt, err := c.sbx.Port(port)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
		},
		Transport:     rt,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusBadGateway {
				// Maybe ended or paused: ask the platform next time.
				c.mu.Lock()
				c.checked = time.Time{}
				c.mu.Unlock()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c.mu.Lock()
			c.checked = time.Time{}
			c.mu.Unlock()
			if r.Context().Err() != nil {
				return
			}
			gone(w, id, "did not answer")
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	c.proxies[port] = p
	return p, nil
}
