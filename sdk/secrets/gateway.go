package secrets

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
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
	Secret Ref
}

// Bearer is the header value "Bearer <secret>".
func Bearer(ref Ref) HeaderValue { return HeaderValue{Prefix: "Bearer ", Secret: ref} }

// Plain is the header value "<secret>".
func Plain(ref Ref) HeaderValue { return HeaderValue{Secret: ref} }

// Gateway is a route of the sandbox's secret gateway: code in the
// sandbox calls http://127.0.0.1:PORT/... (Sandbox.Gateway(Name).URL()),
// and rayd forwards the requests that Allow permits to Upstream over TLS
// with Headers added. The sandbox never sees the secrets. Up to 8 routes.
type Gateway struct {
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

// Placeholder is a secret the sandbox sees only as a placeholder in
// the variable Env. Tools call Host as usual (https, port Port, 443 by
// default); rayd's egress proxy terminates their TLS with the sandbox's
// own CA (which every common tool is made to trust) and replaces the
// placeholder in request headers with the secret when Allow permits the
// request (empty: any method and path). A placeholder sent anywhere else is
// blocked. Other traffic is never decrypted. Up to 16.
type Placeholder struct {
	Env           string
	Secret        Ref
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
// placeholders, they need the root platform (rayito.ErrUnimplemented
// otherwise).
func WithHeaderRules(rules ...HeaderRule) rayito.Option {
	rules = cloneHeaderRules(rules)
	return sandboxOption(func(st *state) { st.headerRules = rules })
}

// WithGateways configures the sandbox's secret gateway routes (Create).
func WithGateways(routes ...Gateway) rayito.Option {
	routes = slices.Clone(routes)
	for i := range routes {
		routes[i].Headers = maps.Clone(routes[i].Headers)
		routes[i].Allow = slices.Clone(routes[i].Allow)
	}
	return sandboxOption(func(st *state) { st.gateways = routes })
}

// WithPlaceholders configures the sandbox's transparent placeholders
// (Create).
func WithPlaceholders(ps ...Placeholder) rayito.Option {
	ps = slices.Clone(ps)
	for i := range ps {
		ps[i].Allow = slices.Clone(ps[i].Allow)
	}
	return sandboxOption(func(st *state) { st.placeholders = ps })
}

func cloneHeaderRules(rules []HeaderRule) []HeaderRule {
	rules = slices.Clone(rules)
	for i := range rules {
		rules[i].Headers = maps.Clone(rules[i].Headers)
	}
	return rules
}

// Refresh reads the secrets of the sandbox's gateway routes and
// placeholders again (bypassing the cache) and hands the new values to
// rayd: ports and placeholders are kept, so nothing in the sandbox changes
// but the values the gateway injects. A sandbox this program configured
// no secrets of (a handle from Connect) has nothing to refresh.
func Refresh(ctx context.Context, sb *rayito.Sandbox) error {
	st, _ := hook.Value(sb, stateKey{}, nil).(*state)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	gws, phs, hrs := st.sentGateways, st.sentPlaceholders, st.sentHeaderRules
	st.mu.Unlock()
	if len(gws) == 0 && len(phs) == 0 && len(hrs) == 0 {
		return nil
	}
	return st.configure(ctx, sb, gws, phs, hrs, true)
}

// UpdateHeaderRules replaces the sandbox's header rules (none: every rule
// goes), keeping its gateway routes and placeholders; the values are read
// through the sandbox's secret store. Placeholders this handle did not
// configure (a handle from Connect) cannot be kept: the call is then
// rayito.ErrInvalidArgument and changes nothing.
func UpdateHeaderRules(ctx context.Context, sb *rayito.Sandbox, rules ...HeaderRule) error {
	rules = cloneHeaderRules(rules)
	if rules == nil {
		rules = []HeaderRule{} // sent: the rules go
	}
	st := hook.Value(sb, stateKey{}, newState).(*state)
	st.mu.Lock()
	phs := st.sentPlaceholders
	st.mu.Unlock()
	if len(hook.Placeholders(sb)) > 0 && phs == nil {
		return rayito.NewError(rayito.ReasonInvalidArgument, "header rules: the sandbox has placeholders this handle did not configure, which the update would remove")
	}
	if phs == nil {
		phs = []Placeholder{}
	}
	return st.configure(ctx, sb, nil, phs, rules, false)
}

// configure resolves the secrets and applies both sections (the header
// rules share the placeholders' section) in one Configure call.
func (st *state) configure(ctx context.Context, sb *rayito.Sandbox, gws []Gateway, phs []Placeholder, hrs []HeaderRule, fresh bool) error {
	req := &raydv1.ConfigureRequest{}
	if err := st.sections(ctx, sb, req, gws, phs, hrs, fresh); err != nil {
		return err
	}
	results, err := hook.Configure(ctx, sb, req)
	if err != nil {
		return err
	}
	return st.record(results, gws, phs, hrs)
}

// record keeps what was sent (Refresh sends it again); the first secret
// section of results that failed is the error.
func (st *state) record(results []*raydv1.SectionResult, gws []Gateway, phs []Placeholder, hrs []HeaderRule) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if gws != nil {
		st.sentGateways = gws
	}
	if phs != nil || hrs != nil {
		st.sentPlaceholders, st.sentHeaderRules = phs, hrs
	}
	for _, r := range results {
		if sec := r.GetSection(); sec != raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY && sec != raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS {
			continue // another section of the same request (Create's)
		}
		if err := hook.SectionError(r); err != nil {
			return err
		}
	}
	return nil
}

// sections resolves the secrets of gws, phs and hrs (through the
// cache; fresh: bypassing it) into req's gateway section (gws non-nil)
// and placeholders section (phs or hrs non-nil).
func (st *state) sections(ctx context.Context, sb *rayito.Sandbox, req *raydv1.ConfigureRequest, gws []Gateway, phs []Placeholder, hrs []HeaderRule, fresh bool) error {
	value := func(ref Ref) (string, error) {
		c, err := st.cacheOf(ctx, sb)
		if err != nil {
			return "", err
		}
		if fresh {
			c.Invalidate(ref)
		}
		v, err := c.Get(ctx, ref)
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
				return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("gateways[%d]: rate per minute must be 0 to 6000", i))
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
				return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("header_rules[%d]: port out of range", i))
			}
			hs, err := headerMsgs(r.Headers)
			if err != nil {
				return err
			}
			m.HeaderRules = append(m.HeaderRules, &raydv1.HeaderRule{Host: strings.ToLower(strings.TrimSuffix(r.Host, ".")), Port: uint32(r.Port), Headers: hs})
		}
		for i, p := range phs {
			if p.Port < 0 || p.Port > 65535 {
				return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("placeholders[%d]: port out of range", i))
			}
			if p.RatePerMinute < 0 || p.RatePerMinute > 6000 {
				return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("placeholders[%d]: rate per minute must be 0 to 6000", i))
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

func ruleMsgs(rs []GatewayRule) []*raydv1.GatewayRule {
	out := make([]*raydv1.GatewayRule, 0, len(rs))
	for _, r := range rs {
		out = append(out, &raydv1.GatewayRule{Method: r.Method, Path: r.Path})
	}
	return out
}
