package gateway

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
)

// Limits of a configuration.
const (
	MaxRoutes            = 8
	MaxPlaceholders      = 16
	MaxRouteHeaders      = 16
	MaxHeaderRules       = 16
	MaxRules             = 32
	DefaultRatePerMinute = 600
	MaxRatePerMinute     = 6000
	minScrubSecretSize   = 8
)

// Rule allows requests by method and path.
type Rule struct {
	// Method is an upper-case HTTP method token, or "*" for any method.
	Method string
	// Path is an exact path ("/v1/messages") or a prefix ending in "/*"
	// ("/v1/*" matches "/v1/" and everything below it; "/*" matches every
	// path). Paths are compared with the once-decoded request path.
	Path string
}

// Header is a header injected into every request of a route.
type Header struct {
	Name   string // a valid token name
	Prefix string // not secret, e.g. "Bearer "
	Secret string // the secret; the injected value is Prefix+Secret
}

// String omits the secret.
func (h Header) String() string { return "gateway.Header{Name:" + strconv.Quote(h.Name) + "}" }

// GoString omits the secret.
func (h Header) GoString() string { return h.String() }

// LogValue omits the secret.
func (h Header) LogValue() slog.Value { return slog.GroupValue(slog.String("name", h.Name)) }

// Route is an explicit route: sandbox code calls http://127.0.0.1:PORT/path
// and the gateway forwards to Upstream, injecting Headers.
type Route struct {
	Name          string   // [a-z0-9][a-z0-9_-]{0,62}
	Upstream      string   // https://host[:port], nothing after the authority
	Headers       []Header // at most 16
	Rules         []Rule   // 1..32
	RatePerMinute uint32   // 0 = 600, max 6000
}

// String omits secrets and the upstream.
func (r Route) String() string {
	return fmt.Sprintf("gateway.Route{Name:%q Headers:%d Rules:%d RatePerMinute:%d}",
		r.Name, len(r.Headers), len(r.Rules), r.RatePerMinute)
}

// GoString omits secrets and the upstream.
func (r Route) GoString() string { return r.String() }

// LogValue omits secrets and the upstream.
func (r Route) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", r.Name), slog.Int("headers", len(r.Headers)),
		slog.Int("rules", len(r.Rules)))
}

// Placeholder is a transparent secret: the sandbox sees only Placeholder,
// and the gateway replaces it with Secret in requests to Host:Port.
type Placeholder struct {
	Name          string // [A-Za-z_][A-Za-z0-9_]{0,127} (the env var name)
	Placeholder   string // 24..128 chars of [A-Za-z0-9_-]
	Secret        string // the real value
	Host          string // exact lower-case DNS host name
	Port          uint16 // 0 = 443
	Rules         []Rule // empty = any method and path
	RatePerMinute uint32 // 0 = 600, max 6000
}

// String omits the secret, the placeholder string and the host.
func (p Placeholder) String() string {
	return fmt.Sprintf("gateway.Placeholder{Name:%q Rules:%d RatePerMinute:%d}",
		p.Name, len(p.Rules), p.RatePerMinute)
}

// GoString omits the secret, the placeholder string and the host.
func (p Placeholder) GoString() string { return p.String() }

// LogValue omits the secret, the placeholder string and the host.
func (p Placeholder) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", p.Name), slog.Int("rules", len(p.Rules)))
}

// HeaderRule adds headers to every HTTPS request of the sandbox to a
// matching host (E2B's network rules): each replaces a header of the same
// name the request carries. A rule claims the host's connections for
// interception (the sandbox's CA terminates them) but grants no access:
// whether the host is reached at all is the network policy's to say.
type HeaderRule struct {
	// An exact lower-case DNS host name, or "*." and one: any subdomain at
	// any depth, not the apex. An exact rule beats a wildcard, a longer
	// wildcard a shorter one; rules are not merged.
	Host    string
	Port    uint16   // 0 = 443
	Headers []Header // 1..16
}

// String omits the secrets and the host.
func (r HeaderRule) String() string {
	return fmt.Sprintf("gateway.HeaderRule{Headers:%d}", len(r.Headers))
}

// GoString omits the secrets and the host.
func (r HeaderRule) GoString() string { return r.String() }

// LogValue omits the secrets and the host.
func (r HeaderRule) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("headers", len(r.Headers)))
}

// headerRuleConfig is a validated HeaderRule.
type headerRuleConfig struct {
	host     string // without "*." for a wildcard
	wildcard bool
	port     uint16
	headers  []injected
	scrub    []string
}

func validateHeaderRules(in []HeaderRule) ([]*headerRuleConfig, error) {
	if len(in) > MaxHeaderRules {
		return nil, cfgErr("header_rules", fmt.Sprintf("more than %d header rules", MaxHeaderRules))
	}
	seen := map[hostPort]bool{}
	out := make([]*headerRuleConfig, 0, len(in))
	for i, r := range in {
		f := fmt.Sprintf("header_rules[%d]", i)
		host, wildcard := strings.CutPrefix(r.Host, "*.")
		if !isDNSName(host) {
			return nil, cfgErr(f+".host", "not a lower-case DNS host name or *. and one")
		}
		port := r.Port
		if port == 0 {
			port = 443
		}
		if seen[hostPort{r.Host, port}] {
			return nil, cfgErr(f+".host", "duplicate host")
		}
		seen[hostPort{r.Host, port}] = true
		if len(r.Headers) == 0 {
			return nil, cfgErr(f+".headers", "at least one header required")
		}
		inj, scrub, err := validateHeaders(f+".headers", r.Headers)
		if err != nil {
			return nil, err
		}
		out = append(out, &headerRuleConfig{host: host, wildcard: wildcard, port: port, headers: inj, scrub: scrub})
	}
	return out, nil
}

// matchHeaderRule is the rule of host:port: the exact one, else the
// longest wildcard whose domain host is under; nil when none.
func matchHeaderRule(rules []*headerRuleConfig, host string, port uint16) *headerRuleConfig {
	var best *headerRuleConfig
	for _, r := range rules {
		if r.port != port {
			continue
		}
		if !r.wildcard {
			if r.host == host {
				return r
			}
			continue
		}
		if strings.HasSuffix(host, "."+r.host) && (best == nil || len(r.host) > len(best.host)) {
			best = r
		}
	}
	return best
}

// ConfigError is the error of SetRoutes and SetPlaceholders. It names the
// field and index, never a value. Use errors.As with a *ConfigError target.
type ConfigError struct {
	Field  string // e.g. "routes[1].headers[0].name"
	Reason string // e.g. "not a token"
}

func (e ConfigError) Error() string { return "gateway: " + e.Field + ": " + e.Reason }

func cfgErr(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

// rule is a validated Rule.
type rule struct {
	method string // "" = any
	path   string // decoded
	prefix bool
}

func (r rule) match(method, decodedPath string) bool {
	if r.method != "" && r.method != method {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(decodedPath, r.path)
	}
	return decodedPath == r.path
}

func matchRules(rules []rule, method, decodedPath string) bool {
	for _, r := range rules {
		if r.match(method, decodedPath) {
			return true
		}
	}
	return false
}

func validateRules(field string, in []Rule) ([]rule, error) {
	if len(in) > MaxRules {
		return nil, cfgErr(field, fmt.Sprintf("more than %d rules", MaxRules))
	}
	out := make([]rule, 0, len(in))
	for i, r := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		var v rule
		switch {
		case r.Method == "*":
		case isToken(r.Method) && strings.ToUpper(r.Method) == r.Method:
			v.method = r.Method
		default:
			return nil, cfgErr(f+".method", "not an upper-case method token or \"*\"")
		}
		p := r.Path
		if strings.HasSuffix(p, "/*") {
			v.prefix = true
			p = p[:len(p)-1]
		}
		d, err := decodePath(p)
		if err != nil {
			return nil, cfgErr(f+".path", "not an allowed path")
		}
		v.path = d
		out = append(out, v)
	}
	return out, nil
}

func validRate(r uint32) bool { return r <= MaxRatePerMinute }

func effRate(r uint32) uint32 {
	if r == 0 {
		return DefaultRatePerMinute
	}
	return r
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHeaderValue refuses CR, LF, NUL and other control characters
// (horizontal tab is allowed), which no transport would send anyway.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

var hopByHop = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Upgrade", "Proxy-Connection", "Transfer-Encoding"}

func forbiddenInjected(name string) bool {
	l := strings.ToLower(name)
	switch l {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive",
		"te", "trailer", "upgrade", "proxy-connection":
		return true
	}
	return strings.HasPrefix(l, "proxy-")
}

func isRouteName(s string) bool {
	if len(s) < 1 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func isPlaceholderName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func isPlaceholderToken(s string) bool {
	if len(s) < 24 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			continue
		}
		return false
	}
	return true
}

// isDNSName reports whether s is a lower-case DNS host name that is not an
// IP literal.
func isDNSName(s string) bool {
	if len(s) < 1 || len(s) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if len(l) < 1 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' {
				continue
			}
			return false
		}
	}
	// An all-numeric last label is how IPv4 shorthand looks; refuse it.
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return false
	}
	return true
}

// parseUpstream parses "https://host[:port]".
func parseUpstream(s string) (host string, port uint16, reason string) {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		return "", 0, "not https://host[:port]"
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@\\ ") {
		return "", 0, "only https://host[:port] allowed (no path, query, fragment or userinfo)"
	}
	hostPart, portPart := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", 0, "bad host"
		}
		hostPart = rest[1:end]
		after := rest[end+1:]
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return "", 0, "bad host"
			}
			portPart = p
		}
		a, err := netip.ParseAddr(hostPart)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, "bad host"
		}
		hostPart = a.String()
	} else {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			hostPart, portPart = rest[:i], rest[i+1:]
			if portPart == "" {
				return "", 0, "bad port"
			}
		}
		hostPart = strings.ToLower(hostPart)
		if a, err := netip.ParseAddr(hostPart); err == nil {
			if !a.Is4() {
				return "", 0, "bad host"
			}
		} else if !isDNSName(hostPart) {
			return "", 0, "bad host"
		}
	}
	port = 443
	if portPart != "" {
		n, err := strconv.ParseUint(portPart, 10, 16)
		if err != nil || n == 0 || portPart[0] == '0' {
			return "", 0, "bad port"
		}
		port = uint16(n)
	}
	return hostPart, port, ""
}

// routeConfig is a validated Route.
type routeConfig struct {
	name     string
	host     string
	port     uint16
	headers  []injected
	rules    []rule
	rate     uint32
	scrubVal []string // secrets of length >= 8
}

type injected struct {
	name  string // canonical
	value string
}

// validateHeaders checks the headers a route or a header rule injects:
// token names that may be injected, unique case-insensitively, a
// non-empty secret, no control characters. It returns them injectable
// and the secrets long enough to scrub from answers.
func validateHeaders(f string, hs []Header) ([]injected, []string, error) {
	if len(hs) > MaxRouteHeaders {
		return nil, nil, cfgErr(f, fmt.Sprintf("more than %d headers", MaxRouteHeaders))
	}
	var inj []injected
	var scrub []string
	names := map[string]bool{}
	for j, h := range hs {
		hf := fmt.Sprintf("%s[%d]", f, j)
		if !isToken(h.Name) {
			return nil, nil, cfgErr(hf+".name", "not a token")
		}
		if forbiddenInjected(h.Name) {
			return nil, nil, cfgErr(hf+".name", "header may not be injected")
		}
		l := strings.ToLower(h.Name)
		if names[l] {
			return nil, nil, cfgErr(hf+".name", "duplicate header")
		}
		names[l] = true
		if h.Secret == "" {
			return nil, nil, cfgErr(hf+".secret", "empty")
		}
		if !validHeaderValue(h.Prefix) {
			return nil, nil, cfgErr(hf+".prefix", "contains a control character")
		}
		if !validHeaderValue(h.Secret) {
			return nil, nil, cfgErr(hf+".secret", "contains a control character")
		}
		inj = append(inj, injected{name: canonicalKey(h.Name), value: h.Prefix + h.Secret})
		if len(h.Secret) >= minScrubSecretSize {
			scrub = append(scrub, h.Secret)
		}
	}
	return inj, scrub, nil
}

func validateRoutes(in []Route) ([]*routeConfig, error) {
	if len(in) > MaxRoutes {
		return nil, cfgErr("routes", fmt.Sprintf("more than %d routes", MaxRoutes))
	}
	seen := map[string]bool{}
	out := make([]*routeConfig, 0, len(in))
	for i, r := range in {
		f := fmt.Sprintf("routes[%d]", i)
		if !isRouteName(r.Name) {
			return nil, cfgErr(f+".name", "not [a-z0-9][a-z0-9_-]{0,62}")
		}
		if seen[r.Name] {
			return nil, cfgErr(f+".name", "duplicate name")
		}
		seen[r.Name] = true
		host, port, reason := parseUpstream(r.Upstream)
		if reason != "" {
			return nil, cfgErr(f+".upstream", reason)
		}
		if len(r.Headers) > MaxRouteHeaders {
			return nil, cfgErr(f+".headers", fmt.Sprintf("more than %d headers", MaxRouteHeaders))
		}
		rc := &routeConfig{name: r.Name, host: host, port: port, rate: effRate(r.RatePerMinute)}
		var err error
		if rc.headers, rc.scrubVal, err = validateHeaders(f+".headers", r.Headers); err != nil {
			return nil, err
		}
		if len(r.Rules) == 0 {
			return nil, cfgErr(f+".rules", "at least one rule required")
		}
		rules, err := validateRules(f+".rules", r.Rules)
		if err != nil {
			return nil, err
		}
		rc.rules = rules
		if !validRate(r.RatePerMinute) {
			return nil, cfgErr(f+".rate_per_minute", fmt.Sprintf("more than %d", MaxRatePerMinute))
		}
		out = append(out, rc)
	}
	return out, nil
}

// placeholderConfig is a validated Placeholder.
type placeholderConfig struct {
	name   string
	token  string
	secret string
	host   string
	port   uint16
	rules  []rule // nil = any
	rate   uint32
}

func validatePlaceholders(in []Placeholder) ([]*placeholderConfig, error) {
	if len(in) > MaxPlaceholders {
		return nil, cfgErr("placeholders", fmt.Sprintf("more than %d placeholders", MaxPlaceholders))
	}
	seen := map[string]bool{}
	out := make([]*placeholderConfig, 0, len(in))
	for i, p := range in {
		f := fmt.Sprintf("placeholders[%d]", i)
		if !isPlaceholderName(p.Name) {
			return nil, cfgErr(f+".name", "not [A-Za-z_][A-Za-z0-9_]{0,127}")
		}
		if seen[p.Name] {
			return nil, cfgErr(f+".name", "duplicate name")
		}
		seen[p.Name] = true
		if !isPlaceholderToken(p.Placeholder) {
			return nil, cfgErr(f+".placeholder", "not 24..128 characters of [A-Za-z0-9_-]")
		}
		for j, q := range out {
			if strings.Contains(p.Placeholder, q.token) || strings.Contains(q.token, p.Placeholder) {
				return nil, cfgErr(f+".placeholder", fmt.Sprintf("equal to or overlapping placeholders[%d]", j))
			}
		}
		if p.Secret == "" {
			return nil, cfgErr(f+".secret", "empty")
		}
		if !validHeaderValue(p.Secret) {
			return nil, cfgErr(f+".secret", "contains a control character")
		}
		if !isDNSName(p.Host) {
			return nil, cfgErr(f+".host", "not a lower-case DNS host name")
		}
		port := p.Port
		if port == 0 {
			port = 443
		}
		rules, err := validateRules(f+".rules", p.Rules)
		if err != nil {
			return nil, err
		}
		if len(rules) == 0 {
			rules = nil
		}
		if !validRate(p.RatePerMinute) {
			return nil, cfgErr(f+".rate_per_minute", fmt.Sprintf("more than %d", MaxRatePerMinute))
		}
		out = append(out, &placeholderConfig{name: p.Name, token: p.Placeholder, secret: p.Secret,
			host: p.Host, port: port, rules: rules, rate: effRate(p.RatePerMinute)})
	}
	return out, nil
}
