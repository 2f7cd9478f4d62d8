package rayito

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/transport"
)

// Port is one TCP port of the sandbox (a server its code runs), reached
// through the sandbox's endpoint: on AWS https://<endpoint> with a proxy
// auth token that covers this port only, locally the platform's address.
// Get one with Sandbox.Port; it is safe for concurrent use.
type Port struct {
	number int
	url    string
	host   string
	tokens *transport.Tokens
	client *http.Client
}

// Port returns the way into port (1–65535) of the sandbox. Port 9000 is
// the platform's lifecycle hooks port and is refused here, before any
// call: nothing outside the sandbox should ever reach it. No call is made
// until the first request; the port's auth token is minted then, cached,
// renewed after 45 of its 60 minutes and re-minted once if the endpoint
// refuses it.
//
// The sandbox's access token is never sent to the port: it is for rayd
// only.
func (s *Sandbox) Port(port int) (*Port, error) {
	switch {
	case port < 1 || port > 65535:
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("port %d: want 1 to 65535", port))
	case port == microvmsapi.HooksPort:
		return nil, newError(ReasonInvalidArgument, "port 9000 is the platform's lifecycle hooks port: it is never reachable through the endpoint")
	}
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	if p := s.ports[port]; p != nil {
		return p, nil
	}
	tokens := portTokens(s.mv, s.id, port)
	p := &Port{
		number: port, url: s.dp.baseURL, host: s.endpoint, tokens: tokens,
		// HTTP/1.1: uploads through the AWS proxy are much faster than on
		// one h2 stream, and WebSocket upgrades need it.
		client: &http.Client{Transport: &transport.Proxy{Base: s.dp.http1, Host: s.endpoint, Port: port, Tokens: tokens}},
	}
	if s.ports == nil {
		s.ports = map[int]*Port{}
	}
	s.ports[port] = p
	return p, nil
}

// Number is the port's number.
func (p *Port) Number() int { return p.number }

// URL is the base URL requests to the port go to with Client (the
// endpoint's on AWS, the platform's locally); add the path to it.
func (p *Port) URL() string { return p.url }

// Client is an HTTP client that reaches the port: it adds the endpoint's
// headers (Host, x-aws-proxy-auth, x-aws-proxy-port) to every request
// sent to URL.
func (p *Port) Client() *http.Client { return p.client }

// Headers returns the headers a request to URL needs, for tools other
// than Client (a WebSocket library, curl): Host, x-aws-proxy-auth and
// x-aws-proxy-port. The auth token in them is valid for up to an hour
// and covers this port only; treat it as a secret.
func (p *Port) Headers(ctx context.Context) (http.Header, error) {
	tok, err := p.tokens.Get(ctx)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Host", p.host)
	h.Set(microvmsapi.ProxyAuthHeader, tok)
	h.Set(microvmsapi.ProxyPortHeader, strconv.Itoa(p.number))
	return h, nil
}
