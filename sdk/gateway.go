package rayito

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// GatewayRule allows requests by method and path: Method is an upper-case
// HTTP method or "*"; Path is exact ("/v1/messages") or a prefix ending in
// "/*" ("/v1/*"; "/*" is every path).
type GatewayRule struct {
	Method string
	Path   string
}

// HeaderValue is a header a gateway injects: Prefix followed by the
// secret's value. Only the secret's reference is kept in the SDK's
// options; the value is read from the secret store when the gateway is
// configured (and by Refresh); a line break that ends the stored value (as
// `echo key | rayito secret create` leaves) is dropped, since no header can
// carry one.
type HeaderValue struct {
	Prefix string // not secret, e.g. "Bearer "
	Secret SecretRef
}

// Bearer is the header value "Bearer <secret>".
func Bearer(ref SecretRef) HeaderValue { return HeaderValue{Prefix: "Bearer ", Secret: ref} }

// Plain is the header value "<secret>".
func Plain(ref SecretRef) HeaderValue { return HeaderValue{Secret: ref} }

// SecretGateway is a route of the sandbox's secret gateway: code in the
// sandbox calls http://127.0.0.1:PORT/... (Sandbox.Gateway(Name).URL()),
// and rayd forwards the requests that Allow permits to Upstream over TLS
// with Headers added. The sandbox never sees the secrets. Up to 8 routes.
type SecretGateway struct {
	// Name identifies the route: [a-z0-9][a-z0-9_-]{0,62}.
	Name string
	// Upstream is https://host[:port], nothing after the authority.
	Upstream string
	// Headers are injected into every forwarded request (at most 16); the
	// sandbox's own copies are dropped.
	Headers map[string]HeaderValue
	// Allow lists the (method, path) rules: 1 to 32.
	Allow []GatewayRule
	// RatePerMinute bounds the route's requests (0: 600; at most 6000).
	RatePerMinute int
	// Env, when set, is a variable processes started from then on get,
	// holding the route's URL followed by EnvPath (e.g.
	// ANTHROPIC_BASE_URL).
	Env     string
	EnvPath string
}

// SecretPlaceholder is a secret the sandbox sees only as a placeholder in
// the variable Env. Tools call Host as usual (https, port Port, 443 by
// default); rayd's egress proxy terminates their TLS with the sandbox's
// own CA (which every common tool is made to trust) and replaces the
// placeholder in request headers with the secret when Allow permits the
// request (empty: any method and path). A placeholder sent anywhere else is
// blocked. Other traffic is never decrypted. Up to 16.
type SecretPlaceholder struct {
	Env           string
	Secret        SecretRef
	Host          string
	Port          int
	Allow         []GatewayRule
	RatePerMinute int
}

// HeaderRule adds headers to every HTTPS request the sandbox sends to a
// matching host (E2B's network rules): each replaces a header of the same
// name the request carries, so code in the sandbox cannot forge it and
// never sees the values. rayd's egress proxy terminates the TLS of those
// hosts with the sandbox's own CA, as for placeholders. A rule grants no
// access: the network policy still decides whether the host is reached.
// Up to 16.
type HeaderRule struct {
	// Host is an exact DNS name ("api.example.com") or "*." and one (any
	// subdomain at any depth, not the apex). An exact rule beats a
	// wildcard, a longer wildcard a shorter one; rules are not merged.
	Host string
	// Port is the HTTPS port (0: 443).
	Port int
	// Headers are 1 to 16 headers and their values, read from the secret
	// store when the sandbox is configured (and by Refresh).
	Headers map[string]HeaderValue
}

// WithHeaderRules configures the sandbox's header rules (Create). Like
// placeholders, they need the root platform (ErrUnimplemented
// otherwise).
func WithHeaderRules(rules ...HeaderRule) Option {
	rules = slices.Clone(rules)
	for i := range rules {
		rules[i].Headers = maps.Clone(rules[i].Headers)
	}
	return sandboxOption(func(c *config) { c.headerRules = rules })
}

// WithGateways configures the sandbox's secret gateway routes (Create).
func WithGateways(routes ...SecretGateway) Option {
	routes = slices.Clone(routes)
	for i := range routes {
		routes[i].Headers = maps.Clone(routes[i].Headers)
		routes[i].Allow = slices.Clone(routes[i].Allow)
	}
	return sandboxOption(func(c *config) { c.gateways = routes })
}

// WithSecretPlaceholders configures the sandbox's transparent placeholders
// (Create).
func WithSecretPlaceholders(ps ...SecretPlaceholder) Option {
	ps = slices.Clone(ps)
	for i := range ps {
		ps[i].Allow = slices.Clone(ps[i].Allow)
	}
	return sandboxOption(func(c *config) { c.placeholders = ps })
}

// gatewayConfig is the part of config the secret options set.
type gatewayConfig struct {
	gateways     []SecretGateway
	placeholders []SecretPlaceholder
	headerRules  []HeaderRule
}

// GatewayEndpoint is a configured route of the sandbox's gateway.
type GatewayEndpoint struct {
	name string
	port uint16
}

// Name is the route's name.
func (g *GatewayEndpoint) Name() string {
	if g == nil {
		return ""
	}
	return g.name
}

// Port is the route's loopback port inside the sandbox (0 for an unknown
// route).
func (g *GatewayEndpoint) Port() int {
	if g == nil {
		return 0
	}
	return int(g.port)
}

// URL is the address sandbox code calls: http://127.0.0.1:PORT ("" for an
// unknown route).
func (g *GatewayEndpoint) URL() string {
	if g == nil || g.port == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(int(g.port))
}

// secretsState is what the sandbox knows of its gateway: the options to
// apply again on Refresh, and the routes and placeholders in force.
type secretsState struct {
	mu           sync.Mutex
	gateways     []SecretGateway
	placeholders []SecretPlaceholder
	headerRules  []HeaderRule
	routes       map[string]uint16 // name -> port
	values       map[string]string // variable -> placeholder
}

// Gateway returns the route named name, or nil when the sandbox has none of
// that name (its methods then answer zero values).
func (s *Sandbox) Gateway(name string) *GatewayEndpoint {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	port, ok := s.secrets.routes[name]
	if !ok {
		return nil
	}
	return &GatewayEndpoint{name: name, port: port}
}

// Gateways returns the sandbox's routes, sorted by name.
func (s *Sandbox) Gateways() []*GatewayEndpoint {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	var out []*GatewayEndpoint
	for _, name := range slices.Sorted(maps.Keys(s.secrets.routes)) {
		out = append(out, &GatewayEndpoint{name: name, port: s.secrets.routes[name]})
	}
	return out
}

// Placeholder returns the placeholder the sandbox sees in the variable env
// ("" when none): not a secret.
func (s *Sandbox) Placeholder(env string) string {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	return s.secrets.values[env]
}

// Refresh reads the secrets of the sandbox's gateway routes and
// placeholders again (bypassing the cache) and hands the new values to
// rayd: ports and placeholders are kept, so nothing in the sandbox changes
// but the values the gateway injects.
func (s *Sandbox) Refresh(ctx context.Context) error {
	s.secrets.mu.Lock()
	gws, phs, hrs := s.secrets.gateways, s.secrets.placeholders, s.secrets.headerRules
	s.secrets.mu.Unlock()
	if len(gws) == 0 && len(phs) == 0 && len(hrs) == 0 {
		return nil
	}
	return s.configureSecrets(ctx, gws, phs, hrs, true)
}

// UpdateHeaderRules replaces the sandbox's header rules (none: every rule
// goes), keeping its gateway routes and placeholders; the values are read
// through the sandbox's secret store. Placeholders this handle did not
// configure (a handle from Connect) cannot be kept: the call is then
// ErrInvalidArgument and changes nothing.
func (s *Sandbox) UpdateHeaderRules(ctx context.Context, rules ...HeaderRule) error {
	rules = slices.Clone(rules)
	for i := range rules {
		rules[i].Headers = maps.Clone(rules[i].Headers)
	}
	if rules == nil {
		rules = []HeaderRule{} // sent: the rules go
	}
	s.secrets.mu.Lock()
	phs, unknown := s.secrets.placeholders, len(s.secrets.values) > 0 && s.secrets.placeholders == nil
	s.secrets.mu.Unlock()
	if unknown {
		return newError(ReasonInvalidArgument, "header rules: the sandbox has placeholders this handle did not configure, which the update would remove")
	}
	if phs == nil {
		phs = []SecretPlaceholder{}
	}
	return s.configureSecrets(ctx, nil, phs, rules, false)
}

// configureSecrets resolves the secrets and applies both sections (the
// header rules share the placeholders' section).
func (s *Sandbox) configureSecrets(ctx context.Context, gws []SecretGateway, phs []SecretPlaceholder, hrs []HeaderRule, fresh bool) error {
	req := &raydv1.ConfigureRequest{RequestId: newRequestID()}
	if err := s.secretSections(ctx, req, gws, phs, hrs, fresh); err != nil {
		return err
	}
	resp, err := s.dp.config.Configure(ctx, connect.NewRequest(req))
	if err != nil {
		return rpcErr("configure secrets", err)
	}
	return s.recordSecrets(resp.Msg.GetResults(), gws, phs, hrs)
}

// secretSections resolves the secrets of gws, phs and hrs (through the
// cache; fresh: bypassing it) into req's gateway section (gws non-nil)
// and placeholders section (phs or hrs non-nil).
func (s *Sandbox) secretSections(ctx context.Context, req *raydv1.ConfigureRequest, gws []SecretGateway, phs []SecretPlaceholder, hrs []HeaderRule, fresh bool) error {
	value := func(ref SecretRef) (string, error) {
		if fresh {
			if c, err := s.cfg.secretCacheOf(ctx); err == nil {
				c.Invalidate(ref)
			}
		}
		v, err := s.secretValue(ctx, ref)
		if err != nil {
			return "", err
		}
		// A header value cannot hold a line break: the one a secret
		// stored from `echo key |` ends with is not part of the key.
		return strings.TrimRight(string(v), "\r\n"), nil
	}
	headerMsgs := func(hs map[string]HeaderValue) ([]*raydv1.GatewayHeader, error) {
		var out []*raydv1.GatewayHeader
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			hv := hs[name]
			v, err := value(hv.Secret)
			if err != nil {
				return nil, err
			}
			out = append(out, &raydv1.GatewayHeader{Name: name, Prefix: hv.Prefix, Secret: v})
		}
		return out, nil
	}
	if gws != nil {
		m := &raydv1.SecretGatewayConfig{}
		for i, g := range gws {
			if g.RatePerMinute < 0 || g.RatePerMinute > 6000 {
				return newError(ReasonInvalidArgument, fmt.Sprintf("gateways[%d]: rate per minute must be 0 to 6000", i))
			}
			r := &raydv1.GatewayRoute{Name: g.Name, Upstream: g.Upstream, RatePerMinute: uint32(g.RatePerMinute), Env: g.Env, EnvPath: g.EnvPath}
			var err error
			if r.Headers, err = headerMsgs(g.Headers); err != nil {
				return err
			}
			r.Rules = ruleMsgs(g.Allow)
			m.Routes = append(m.Routes, r)
		}
		req.SecretGateway = m
	}
	if phs != nil || hrs != nil {
		m := &raydv1.SecretPlaceholdersConfig{}
		for i, r := range hrs {
			if r.Port < 0 || r.Port > 65535 {
				return newError(ReasonInvalidArgument, fmt.Sprintf("header_rules[%d]: port out of range", i))
			}
			hs, err := headerMsgs(r.Headers)
			if err != nil {
				return err
			}
			m.HeaderRules = append(m.HeaderRules, &raydv1.HeaderRule{Host: strings.ToLower(strings.TrimSuffix(r.Host, ".")), Port: uint32(r.Port), Headers: hs})
		}
		for i, p := range phs {
			if p.Port < 0 || p.Port > 65535 {
				return newError(ReasonInvalidArgument, fmt.Sprintf("placeholders[%d]: port out of range", i))
			}
			if p.RatePerMinute < 0 || p.RatePerMinute > 6000 {
				return newError(ReasonInvalidArgument, fmt.Sprintf("placeholders[%d]: rate per minute must be 0 to 6000", i))
			}
			v, err := value(p.Secret)
			if err != nil {
				return err
			}
			m.Placeholders = append(m.Placeholders, &raydv1.SecretPlaceholder{Env: p.Env, Secret: v,
				Host: strings.ToLower(strings.TrimSuffix(p.Host, ".")), Port: uint32(p.Port),
				Rules: ruleMsgs(p.Allow), RatePerMinute: uint32(p.RatePerMinute)})
		}
		req.SecretPlaceholders = m
	}
	return nil
}

// recordSecrets keeps what was sent (Refresh sends it again) and the
// routes and placeholders results reports; the first section that failed
// is the error.
func (s *Sandbox) recordSecrets(results []*raydv1.SectionResult, gws []SecretGateway, phs []SecretPlaceholder, hrs []HeaderRule) error {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	// What was sent is what Refresh sends again.
	if gws != nil {
		s.secrets.gateways = gws
	}
	if phs != nil || hrs != nil {
		s.secrets.placeholders, s.secrets.headerRules = phs, hrs
	}
	var failure error
	for _, r := range results {
		if sec := r.GetSection(); sec != raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY && sec != raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS {
			continue // another section of the same request (Create's)
		}
		if err := sectionErr(r); err != nil && failure == nil {
			failure = err
		}
		s.secrets.record(r)
	}
	return failure
}

// record keeps the routes and placeholders a result reports.
func (st *secretsState) record(r *raydv1.SectionResult) {
	switch r.GetSection() {
	case raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY:
		st.routes = map[string]uint16{}
		for _, rt := range r.GetRoutes() {
			st.routes[rt.GetName()] = uint16(rt.GetPort())
		}
	case raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS:
		st.values = map[string]string{}
		for _, p := range r.GetPlaceholders() {
			st.values[p.GetEnv()] = p.GetPlaceholder()
		}
	}
}

// loadSecrets learns the routes and placeholders in force (Connect): a
// rayd without the service has none.
func (s *Sandbox) loadSecrets(ctx context.Context) {
	resp, err := s.dp.config.ConfigureStatus(ctx, connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
	if err != nil {
		s.cfg.logger.Debug("rayito: no gateway status", slog.String("sandbox_id", s.id), slog.String("code", connect.CodeOf(err).String()))
		return
	}
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	for _, r := range resp.Msg.GetSections() {
		if r.GetCode() == raydv1.SectionCode_SECTION_CODE_APPLIED {
			s.secrets.record(r)
		}
	}
}

// sectionErr is the error of a section that was not applied: its fixed
// message names the field, never a value.
func sectionErr(r *raydv1.SectionResult) error {
	what := strings.ToLower(strings.TrimPrefix(r.GetSection().String(), "CONFIG_SECTION_"))
	what = strings.ReplaceAll(what, "_", " ")
	msg := what
	if m := r.GetMessage(); m != "" {
		msg += ": " + m
	}
	switch r.GetCode() {
	case raydv1.SectionCode_SECTION_CODE_APPLIED:
		return nil
	case raydv1.SectionCode_SECTION_CODE_INVALID:
		return newError(ReasonInvalidArgument, msg)
	case raydv1.SectionCode_SECTION_CODE_UNSUPPORTED:
		return newError(ReasonUnimplemented, msg+" ("+r.GetErrorClass()+")")
	}
	return newError(ReasonInternal, msg+" ("+r.GetErrorClass()+")")
}

func ruleMsgs(rs []GatewayRule) []*raydv1.GatewayRule {
	out := make([]*raydv1.GatewayRule, 0, len(rs))
	for _, r := range rs {
		out = append(out, &raydv1.GatewayRule{Method: r.Method, Path: r.Path})
	}
	return out
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
