package rayito

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/transport"
	"github.com/rayito-dev/rayito/sdk/internal/tunnel"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// portTokens mints and caches the auth tokens of one port of a
// sandbox: each token covers exactly that port (never a range, never
// allPorts), so a token that leaks opens one port only.
func portTokens(mv *microvms.Client, id string, port int) *transport.Tokens {
	return transport.NewTokens(func(ctx context.Context) (string, error) {
		return mv.CreateMicrovmAuthToken(ctx, id, &microvmsapi.CreateMicrovmAuthTokenInput{
			ExpirationInMinutes: transport.AuthTokenMinutes,
			AllowedPorts:        []microvmsapi.AllowedPort{{Port: &port}},
		})
	}, time.Now)
}

// dataPlane reaches one sandbox's rayd through the endpoint proxy.
type dataPlane struct {
	baseURL string
	// base and http1 are the transports (base carries the RPCs; http1 the
	// file endpoints, and the sandbox's own ports).
	base, http1 http.RoundTripper
	// own: base and http1 are this sandbox's alone (close closes their
	// idle connections); otherwise they are the process's shared ones.
	own bool
	// tunnel carries the calls to rayd on the local platform (nil on
	// AWS): this sandbox's own tunnels, closed by close.
	tunnel http.RoundTripper
	client *http.Client
	// files carries the HTTP/1.1 file endpoints.
	files   *http.Client
	health  raydv1connect.HealthServiceClient
	process raydv1connect.ProcessServiceClient
	pty     raydv1connect.PtyServiceClient
	fs      raydv1connect.FilesystemServiceClient
	life    raydv1connect.LifecycleServiceClient
	code    raydv1connect.CodeServiceClient
	network raydv1connect.NetworkServiceClient
	config  raydv1connect.ConfigureServiceClient
}

// newDataPlane builds the clients of a sandbox.
//
// Locally the SDK dials the platform's address, names the endpoint in
// Host, and speaks HTTP/1.1 for everything, one connection per call in
// flight (kept alive): on one machine it beats h2c on every call (here an
// exec round trip took 2.2 ms instead of 3.8 ms and output streamed at
// 300 MB/s instead of 155 MB/s), and no RPC of rayd is bidirectional.
//
// On AWS it dials https://<endpoint>: RPCs over h2 (the AWS proxy allows
// few connections per microVM), file transfers over HTTP/1.1 (an h2 upload
// through the AWS proxy is held to a 64 KiB window per round trip).
func newDataPlane(cfg *config, mv *microvms.Client, id, endpoint, accessToken string) *dataPlane {
	baseURL := "https://" + endpoint
	local := cfg.backend == BackendLocal
	if local {
		baseURL = strings.TrimRight(cfg.endpoint, "/")
	}
	tr := transport.For(local, cfg.aws.endpointCAs)
	base, http1 := tr.Base, tr.HTTP1
	tokens := portTokens(mv, id, microvmsapi.DefaultProxyPort)
	hc := &http.Client{Transport: &transport.Proxy{Base: base, Host: endpoint, Port: microvmsapi.DefaultProxyPort, Tokens: tokens, AccessToken: accessToken, ForceH2: !local}}
	fc := &http.Client{Transport: &transport.Proxy{Base: http1, Host: endpoint, Port: microvmsapi.DefaultProxyPort, Tokens: tokens, AccessToken: accessToken}}
	var tun http.RoundTripper
	if u, err := url.Parse(baseURL); local && err == nil && u.Host != "" {
		// Locally every connection to rayd is a tunnel of the endpoint
		// proxy, authorized once when it opens (decision 0010): the proxy
		// copies its bytes and parses no request. The sandbox's other
		// ports keep the per-request path (Sandbox.Port). A refused
		// tunnel is retried on the per-request path (tunnel.Auto), so a
		// refusal reads exactly as it would there.
		tun = &tunnel.Auto{
			Tunnel:     tunnel.Transport(&tunnel.Dialer{Addr: u.Host, Endpoint: endpoint, Port: microvmsapi.DefaultProxyPort, Tokens: tokens}, accessToken),
			PerRequest: fc.Transport,
		}
		hc = &http.Client{Transport: tun}
		fc = hc
	}
	// On this machine the link is not the bottleneck: compressing output
	// in rayd (and inflating it here) only costs CPU, so the local backend
	// does not accept gzip. Through the AWS endpoint (a few MB/s) it does.
	var copts []connect.ClientOption
	if local {
		copts = append(copts, connect.WithAcceptCompression("gzip", nil, nil))
	}
	return &dataPlane{
		baseURL: baseURL,
		own:     tr.Own,
		tunnel:  tun,
		base:    base,
		http1:   http1,
		client:  hc,
		files:   fc,
		health:  raydv1connect.NewHealthServiceClient(hc, baseURL, copts...),
		process: raydv1connect.NewProcessServiceClient(hc, baseURL, copts...),
		pty:     raydv1connect.NewPtyServiceClient(hc, baseURL, copts...),
		fs:      raydv1connect.NewFilesystemServiceClient(hc, baseURL, copts...),
		life:    raydv1connect.NewLifecycleServiceClient(hc, baseURL, copts...),
		code:    raydv1connect.NewCodeServiceClient(hc, baseURL, copts...),
		network: raydv1connect.NewNetworkServiceClient(hc, baseURL, copts...),
		config:  raydv1connect.NewConfigureServiceClient(hc, baseURL, copts...),
	}
}

// close closes the idle connections of the sandbox's own transports; the
// process's shared ones are left to their idle timeout (their connections
// serve every sandbox).
func (d *dataPlane) close() {
	if t, ok := d.tunnel.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	if !d.own {
		return
	}
	for _, t := range []http.RoundTripper{d.base, d.http1} {
		if b, ok := t.(*http.Transport); ok {
			b.CloseIdleConnections()
		}
	}
}
