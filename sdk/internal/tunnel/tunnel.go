// Package tunnel is the SDK's connection-level data plane on the local
// platform: every connection to a sandbox's rayd is a tunnel through the
// platform's endpoint proxy (localplatform.TunnelProtocol), authorized
// once, when it opens, with the sandbox's token for that port. Requests
// then go to rayd over plain HTTP/1.1 with no proxy header: the proxy
// copies bytes and parses nothing per request.
//
// It never imports the SDK's root package; the root builds a Transport
// for each sandbox.
package tunnel

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// Tokens gives the proxy auth token of the sandbox's port (minted and
// cached by the caller) and drops one the proxy refused.
type Tokens interface {
	Get(ctx context.Context) (string, error)
	Invalidate(token string)
}

// Dialer opens tunnels to one port of one sandbox.
type Dialer struct {
	// Addr is the platform's host:port.
	Addr string
	// Endpoint is the sandbox's endpoint (the proxy routes by it).
	Endpoint string
	// Port is the guest port.
	Port int
	// Tokens mints the port's tokens.
	Tokens Tokens
	// Timeout bounds a dial and its handshake (default 10 s).
	Timeout time.Duration
}

// DialContext opens a tunnel; the network and address a transport asks
// for are ignored (every connection goes to Addr). A token the proxy
// refuses (403) is dropped and the dial retried once with a new one. A
// refusal is a *localplatform.TunnelError.
func (d *Dialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		tok, err := d.Tokens.Get(ctx)
		if err != nil {
			return nil, err
		}
		var nd net.Dialer
		raw, err := nd.DialContext(ctx, "tcp", d.Addr)
		if err != nil {
			return nil, err
		}
		conn, err := localplatform.OpenTunnel(ctx, raw, d.Endpoint, tok, d.Port)
		var te *localplatform.TunnelError
		if attempt == 0 && errors.As(err, &te) && te.Status == http.StatusForbidden {
			d.Tokens.Invalidate(tok)
			continue
		}
		return conn, err
	}
}

// Transport returns an HTTP/1.1 transport whose every connection is a
// tunnel of d, and which sets Host to the endpoint and adds the access
// token (when not empty) to every request.
func Transport(d *Dialer, accessToken string) http.RoundTripper {
	var h1 http.Protocols
	h1.SetHTTP1(true)
	base := &http.Transport{
		Proxy:               nil, // the platform is local: never a proxy from the environment
		DialContext:         d.DialContext,
		Protocols:           &h1,
		DisableCompression:  true, // compressing costs more than sending here
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		WriteBufferSize:     256 << 10,
		ReadBufferSize:      256 << 10,
	}
	return &hostTransport{base: base, host: d.Endpoint, accessToken: accessToken}
}

// hostTransport names the endpoint in Host and adds rayd's access token.
type hostTransport struct {
	base        *http.Transport
	host        string
	accessToken string
}

func (t *hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Host = t.host
	if t.accessToken != "" {
		r.Header.Set("x-access-token", t.accessToken)
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle tunnels.
func (t *hostTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// Auto carries requests through Tunnel and answers every refused tunnel
// through PerRequest, the endpoint proxy's per-request path, so that a
// refusal (a token, a sandbox that is gone or not running) reads exactly
// as it always has. When the platform does not open tunnels at all (one
// older than them answers the upgrade as a plain request), Auto stops
// trying and uses PerRequest from then on.
type Auto struct {
	Tunnel, PerRequest http.RoundTripper
	off                atomic.Bool
}

// RoundTrip implements http.RoundTripper.
func (a *Auto) RoundTrip(req *http.Request) (*http.Response, error) {
	if a.off.Load() {
		return a.PerRequest.RoundTrip(req)
	}
	resp, err := a.Tunnel.RoundTrip(req)
	var te *localplatform.TunnelError
	if err == nil || !errors.As(err, &te) {
		return resp, err
	}
	if !proxyRefusal(te) {
		a.off.Store(true)
	}
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, err
		}
		body, berr := req.GetBody()
		if berr != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
	return a.PerRequest.RoundTrip(req)
}

// Tunneling reports whether a still tries tunnels.
func (a *Auto) Tunneling() bool { return !a.off.Load() }

// CloseIdleConnections closes the idle tunnels.
func (a *Auto) CloseIdleConnections() {
	if t, ok := a.Tunnel.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// proxyRefusal reports whether te is the endpoint proxy refusing this
// tunnel (its JSON answer: a token, an unknown endpoint, a microVM that is
// not running or a guest port that does not answer), as opposed to a
// platform that does not know tunnels.
func proxyRefusal(te *localplatform.TunnelError) bool {
	switch te.Status {
	case http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway:
		return te.Message != ""
	}
	return false
}
