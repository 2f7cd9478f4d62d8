// Package hostguard decides which Host and Origin a loopback web server
// of Rayito answers (the sandbox proxy, the local dashboard): the only
// defence a server on 127.0.0.1 has against DNS rebinding (a foreign
// name that resolves to 127.0.0.1 sends its own Host: 421) and against
// pages of other sites calling it from the operator's browser (a foreign
// Origin, "null" included: 403).
//
// The hosts a Guard accepts are, each with the server's port: 127.0.0.1,
// localhost and [::1]; the address the server is bound to; <id>.localhost
// when a sandbox id is given (its own cookie jar in the browser); and the
// extra hosts the operator names. The origins it accepts are http:// and
// each of those hosts, plus the extra origins named. Matching is exact
// after lowercasing: no suffix, no trailing dot, no userinfo, and a port
// is required unless it is 80.
package hostguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid reports an option a Guard cannot use.
var ErrInvalid = errors.New("hostguard: invalid option")

// Options are a Guard's extra hosts and origins.
type Options struct {
	// Bind is the address the server listens on ("" or a loopback
	// address: nothing more).
	Bind string
	// SandboxID, when set, adds <SandboxID>.localhost.
	SandboxID string
	// AllowedHosts are extra host names or addresses (without port: the
	// server's port is added).
	AllowedHosts []string
	// AllowOrigins are extra origins, exactly as a browser sends them
	// (scheme://host[:port]).
	AllowOrigins []string
}

// Guard is an immutable allowlist; safe for concurrent use.
type Guard struct {
	port    int
	hosts   map[string]bool
	origins map[string]bool
}

// New returns the Guard of a server on port.
func New(port int, o Options) (*Guard, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrInvalid, port)
	}
	g := &Guard{port: port, hosts: map[string]bool{}, origins: map[string]bool{}}
	names := []string{"127.0.0.1", "localhost", "[::1]"}
	if o.Bind != "" {
		a, err := netip.ParseAddr(o.Bind)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%w: bind address %q", ErrInvalid, o.Bind)
		}
		if a.Is6() && !a.Is4In6() {
			names = append(names, "["+a.String()+"]")
		} else {
			names = append(names, a.Unmap().String())
		}
	}
	if o.SandboxID != "" {
		if !validLabel(o.SandboxID) {
			return nil, fmt.Errorf("%w: sandbox id %q is not a DNS label", ErrInvalid, o.SandboxID)
		}
		names = append(names, strings.ToLower(o.SandboxID)+".localhost")
	}
	for _, h := range o.AllowedHosts {
		n, err := hostName(h)
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	for _, n := range names {
		hp := n + ":" + strconv.Itoa(port)
		g.hosts[hp] = true
		g.origins["http://"+hp] = true
		if port == 80 {
			g.hosts[n] = true
			g.origins["http://"+n] = true
		}
	}
	for _, raw := range o.AllowOrigins {
		origin, err := canonicalOrigin(raw)
		if err != nil {
			return nil, err
		}
		g.origins[origin] = true
	}
	return g, nil
}

// hostName checks an extra host: a DNS name of labels, or an IP address
// (an IPv6 one bracketed or not); no port.
func hostName(h string) (string, error) {
	h = strings.ToLower(h)
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil && a.Zone() == "" {
		if a.Is6() && !a.Is4In6() {
			return "[" + a.String() + "]", nil
		}
		return a.Unmap().String(), nil
	}
	if len(h) == 0 || len(h) > 253 {
		return "", fmt.Errorf("%w: allowed host %q", ErrInvalid, h)
	}
	for _, l := range strings.Split(h, ".") {
		if !validLabel(l) {
			return "", fmt.Errorf("%w: allowed host %q (a DNS name or an IP address, no port)", ErrInvalid, h)
		}
	}
	return h, nil
}

// validLabel: 1 to 63 of a-z A-Z 0-9 and -, not starting or ending with -.
func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// canonicalOrigin checks an extra origin: http or https, a host, an
// optional port, nothing else.
func canonicalOrigin(raw string) (string, error) {
	o := strings.ToLower(raw)
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok || (scheme != "http" && scheme != "https") || rest == "" || strings.ContainsAny(rest, "/?#@\\ ") {
		return "", fmt.Errorf("%w: origin %q (want scheme://host[:port])", ErrInvalid, raw)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		host, port = rest, ""
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", fmt.Errorf("%w: origin %q", ErrInvalid, raw)
		}
	}
	if _, err := hostName(host); err != nil {
		return "", fmt.Errorf("%w: origin %q", ErrInvalid, raw)
	}
	return o, nil
}

// Port is the server's port.
func (g *Guard) Port() int { return g.port }

// HostOK reports whether a request's Host is one of the accepted ones.
func (g *Guard) HostOK(host string) bool {
	return host != "" && g.hosts[strings.ToLower(host)]
}

// OriginOK reports whether a request's Origin may call: absent (""), or
// one of the accepted origins. "null" never is.
func (g *Guard) OriginOK(origin string) bool {
	if origin == "" {
		return true
	}
	return g.origins[strings.ToLower(origin)]
}

// Check applies both to r: 0 when it may go on, else the status to
// answer (421 Misdirected Request for the Host, 403 for the Origin). A
// request with several Origin headers is refused.
func (g *Guard) Check(r *http.Request) int {
	if !g.HostOK(r.Host) {
		return http.StatusMisdirectedRequest
	}
	origins := r.Header.Values("Origin")
	if len(origins) > 1 || len(origins) == 1 && (origins[0] == "" || !g.OriginOK(origins[0])) {
		return http.StatusForbidden
	}
	return 0
}

// Hosts returns the accepted hosts (host:port), for messages.
func (g *Guard) Hosts() []string {
	out := make([]string, 0, len(g.hosts))
	for h := range g.hosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
