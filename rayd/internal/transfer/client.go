package transfer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ErrAddressRefused: the host resolved only to addresses rayd never
// connects to for a transfer (loopback, link-local and the metadata
// service, unspecified, multicast).
var ErrAddressRefused = errors.New("transfer: the host resolves to an address rayd does not reach")

// imds are the instance metadata service's addresses (link-local anyway;
// named for clarity).
var imds = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// Refused reports whether a transfer never connects to a.
func Refused(a netip.Addr) bool {
	a = a.Unmap()
	for _, m := range imds {
		if a == m {
			return true
		}
	}
	return !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast()
}

// clientOptions shape the HTTP client of transfers (tests change them).
type clientOptions struct {
	// lookup resolves a host; nil is the system's resolver.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// allow admits an address Refused would refuse (tests' loopback
	// servers); nil admits none.
	allow func(netip.Addr) bool
	// roots are the trusted CAs; nil is the system's.
	roots *x509.CertPool
	// platform is the local platform's store (nil: none).
	platform *Platform
}

// Platform is the local platform's store of transfer objects, which rayd
// reaches through the platform's services socket, rayd's alone: requests
// whose URL's host is exactly Host (on port 443, as CheckURL demands) are
// sent there in plain HTTP with the same Host, path and query (the
// signature holds); every other host goes to the network as before.
type Platform struct {
	Host string
	Dial func(ctx context.Context) (net.Conn, error)
}

// platformTransport sends the platform host's requests through its socket.
type platformTransport struct {
	host   string
	socket http.RoundTripper
	net    http.RoundTripper
}

func (t *platformTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" || r.URL.Hostname() != t.host || (r.URL.Port() != "" && r.URL.Port() != "443") {
		return t.net.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme = "http"
	r2.URL.Host = t.host
	r2.Host = t.host
	return t.socket.RoundTrip(r2)
}

// newClient is the transfers' HTTP client: TLS to the URL's host, through
// the guarded resolver, no proxy, no redirect (a 3xx is an answer: see
// the import's and export's handling), bounded header waits.
func newClient(o clientOptions) *http.Client {
	lookup := o.lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if _, err := netip.ParseAddr(host); err == nil {
				return nil, ErrAddressRefused // never an IP literal (CheckURL refused it first)
			}
			addrs, err := lookup(ctx, host)
			if err != nil {
				return nil, err
			}
			var last error = ErrAddressRefused
			for _, a := range addrs {
				if Refused(a) && (o.allow == nil || !o.allow(a)) {
					continue
				}
				c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
		TLSClientConfig:       &tls.Config{RootCAs: o.roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	var rt http.RoundTripper = tr
	if p := o.platform; p != nil && p.Host != "" && p.Dial != nil {
		rt = &platformTransport{host: p.Host, net: tr, socket: &http.Transport{
			Proxy:                 nil,
			DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return p.Dial(ctx) },
			MaxIdleConns:          4,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			ExpectContinueTimeout: time.Second,
		}}
	}
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
