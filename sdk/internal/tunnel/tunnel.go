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
