// Package configure implements ConfigureService, one file per RPC: the
// optional features configured after the sandbox is ready. Built here:
// the secret gateway (its loopback routes) and the transparent secret
// placeholders, both served by the gateway module; the telemetry export
// (package telemetry); the S3 mounts (package s3mount); the EFS volumes
// section answers UNSUPPORTED with the class not_built (docs/features.md). The lifecycle events section hands
// the sandbox's event key to rayd's emitter (package lifeevents).
//
// Secret values arrive only in Configure requests and live only in the
// gateway's memory: nothing in this package logs, returns or stores one
// elsewhere. Status answers carry route names, ports, placeholder
// variables and the placeholders themselves (not secrets), counts and
// error classes.
package configure

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"

	"github.com/rayito-dev/rayito/gateway"
	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/service/network"
)

// Error classes of the sections this package answers.
const (
	ClassInvalid           = "invalid"            // the section breaks a rule (message names the field)
	ClassIsolation         = "isolation"          // rayd shares its user with the sandbox's code: a secret would be readable
	ClassEgressUnavailable = "egress_unavailable" // placeholders need rayd's egress proxy and firewall
	ClassNotBuilt          = "not_built"          // the section's feature is not built in this rayd
	ClassFailed            = "failed"             // applying failed; the previous configuration is in force
	ClassNoExecutionRole   = "no_execution_role"  // the execution role's credentials are not available to rayd
)

// Intercept is the network service's side of the placeholders.
type Intercept interface {
	SetIntercept(ctx context.Context, hosts []network.InterceptHost) error
}

// Interceptors is the egress proxy's side (egress.Proxy).
type Interceptors interface {
	SetInterceptor(i egress.Interceptor)
}

// Trust installs the placeholders' CA where the sandbox's tools look
// (trustca.Installer).
type Trust interface {
	Install(caPEM []byte) error
	Env() map[string]string
}

// Events is rayd's lifecycle event emitter (lifeevents.Emitter).
type Events interface {
	// SetKey installs the sandbox's key (32 bytes) or, empty, turns
	// events off.
	SetKey(key []byte)
}

// Options configure the service.
type Options struct {
	State *sandbox.State
	// Unsupported, when set, is the class every secret section answers
	// UNSUPPORTED with (ClassIsolation when rayd and the sandbox's code
	// share a uid).
	Unsupported string
	// Intercept, Proxy and Trust serve the placeholders; any nil: they
	// answer UNSUPPORTED egress_unavailable.
	Intercept Intercept
	Proxy     Interceptors
	Trust     Trust
	// Gateway returns the gateway's options (resolver, address guard,
	// upstream roots); nil: the defaults.
	Gateway func() gateway.Options
	// Events serves the lifecycle_events section; nil: UNSUPPORTED
	// not_built. Like the secret sections it answers UNSUPPORTED with
	// Unsupported when that is set: the sandbox's code could read the
	// key from rayd's memory and sign events.
	Events Events
	// Telemetry serves the telemetry_export section; nil: UNSUPPORTED
	// not_built. Its bearer token is a secret: the section answers
	// UNSUPPORTED with Unsupported when that is set.
	Telemetry Telemetry
	// Mounts serves the s3_mounts section (s3mount.Manager); nil:
	// UNSUPPORTED not_built (rayd is not root here).
	Mounts Mounts
	Logger *slog.Logger
}

// Service implements raydv1connect.ConfigureServiceHandler.
type Service struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex // serialises Configure; guards the fields below
	gw         *gateway.Gateway
	generation uint64
	results    map[raydv1.ConfigSection]*raydv1.SectionResult // the last result of each section
	routeEnv   map[string][2]string                           // route name -> variable, path
	phs        map[string]string                              // variable -> placeholder, kept across refreshes
	phActive   []string                                       // variables of the placeholders in force
	phConfig   []gateway.Placeholder                          // the placeholders in force (to undo a failed change)
	hrConfig   []gateway.HeaderRule                           // the header rules in force (likewise)
	lastID     string
	lastResp   *raydv1.ConfigureResponse
}

var _ raydv1connect.ConfigureServiceHandler = (*Service)(nil)

// New returns the service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: opts.Logger, results: map[raydv1.ConfigSection]*raydv1.SectionResult{},
		routeEnv: map[string][2]string{}, phs: map[string]string{}}
}

// LifecycleEventsSupported is Health's features.lifecycle_events.
func (s *Service) LifecycleEventsSupported() bool {
	return s.opts.Events != nil && s.opts.Unsupported == ""
}

// applyEvents applies the lifecycle events section: a sandbox_key of
// events.KeySize bytes turns the event lines on (the first time: created),
// an empty one turns them off. The key is never logged or returned.
func (s *Service) applyEvents(m *raydv1.LifecycleEventsConfig) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_LIFECYCLE_EVENTS
	if s.opts.Events == nil {
		return unsupported(sec, ClassNotBuilt, "lifecycle events are not built in this rayd")
	}
	if s.opts.Unsupported != "" {
		return unsupported(sec, s.opts.Unsupported, "lifecycle events need the root platform: here rayd shares its user with the sandbox's code, which could read the key")
	}
	key := m.GetSandboxKey()
	if len(key) != 0 && len(key) != events.KeySize {
		return invalid(sec, "sandbox_key: must be 32 bytes (or empty to turn events off)")
	}
	s.opts.Events.SetKey(key)
	s.log.Info("lifecycle events configured", "on", len(key) != 0)
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED}
}

// SecretGatewaySupported is Health's features.secret_gateway.
func (s *Service) SecretGatewaySupported() bool { return s.opts.Unsupported == "" }

// Close stops the gateway (its listeners and connections).
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw != nil {
		_ = s.gw.Close()
	}
	s.closeMounts()
}

// Env returns the variables processes started from now on get: each
// route's URL under the variable its configuration names, each
// placeholder under its variable, and the trust variables while
// placeholders are in force.
func (s *Service) Env() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw == nil {
		return nil
	}
	env := map[string]string{}
	for _, r := range s.gw.Routes() {
		if v := s.routeEnv[r.Name]; v[0] != "" {
			env[v[0]] = "http://127.0.0.1:" + strconv.Itoa(int(r.Port)) + v[1]
		}
	}
	if len(s.phActive) > 0 {
		if s.opts.Trust != nil {
			maps.Copy(env, s.opts.Trust.Env())
		}
		for _, v := range s.phActive {
			env[v] = s.phs[v]
		}
	}
	return env
}

// gatewayLocked returns the gateway, made on first use: after /run, so
// that its CA is the sandbox's own and never part of a snapshot.
func (s *Service) gatewayLocked() (*gateway.Gateway, error) {
	if s.gw != nil {
		return s.gw, nil
	}
	var o gateway.Options
	if s.opts.Gateway != nil {
		o = s.opts.Gateway()
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	gw, err := gateway.New(o)
	if err != nil {
		return nil, err
	}
	s.gw = gw
	if s.opts.Proxy != nil {
		s.opts.Proxy.SetInterceptor(gw)
	}
	return gw, nil
}

// newPlaceholder returns a fresh placeholder: plainly not a real key.
func newPlaceholder() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "RAYITO-PLACEHOLDER-" + hex.EncodeToString(b)
}

// rules converts the wire rules.
func headers(in []*raydv1.GatewayHeader) []gateway.Header {
	out := make([]gateway.Header, 0, len(in))
	for _, h := range in {
		out = append(out, gateway.Header{Name: h.GetName(), Prefix: h.GetPrefix(), Secret: h.GetSecret()})
	}
	return out
}

func rules(in []*raydv1.GatewayRule) []gateway.Rule {
	out := make([]gateway.Rule, 0, len(in))
	for _, r := range in {
		out = append(out, gateway.Rule{Method: r.GetMethod(), Path: r.GetPath()})
	}
	return out
}

// configMessage is the fixed message of a gateway configuration error
// (field and rule, never a value).
func configMessage(err error) string {
	var ce *gateway.ConfigError
	if errors.As(err, &ce) {
		return strings.TrimPrefix(ce.Error(), "gateway: ")
	}
	return "invalid configuration"
}

// routeStatus renders the routes in force.
func routeStatus(gw *gateway.Gateway) []*raydv1.GatewayRouteStatus {
	var out []*raydv1.GatewayRouteStatus
	for _, r := range gw.Routes() {
		out = append(out, &raydv1.GatewayRouteStatus{Name: r.Name, Port: uint32(r.Port), LastErrorClass: r.LastErrorClass,
			Requests: r.Requests, Refused: r.Refused})
	}
	return out
}

// placeholderStatus renders the placeholders in force.
func (s *Service) placeholderStatus(gw *gateway.Gateway) []*raydv1.PlaceholderStatus {
	var out []*raydv1.PlaceholderStatus
	for _, p := range gw.Placeholders() {
		out = append(out, &raydv1.PlaceholderStatus{Env: p.Name, Placeholder: s.phs[p.Name], Injected: p.Injected,
			Blocked: p.Blocked, LastErrorClass: p.LastErrorClass})
	}
	return out
}

func unsupported(sec raydv1.ConfigSection, class, msg string) *raydv1.SectionResult {
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_UNSUPPORTED, ErrorClass: class, Message: msg}
}

func invalid(sec raydv1.ConfigSection, msg string) *raydv1.SectionResult {
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_INVALID, ErrorClass: ClassInvalid, Message: msg}
}

func failed(sec raydv1.ConfigSection, class, msg string) *raydv1.SectionResult {
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_FAILED, ErrorClass: class, Message: msg}
}

// applyRoutes applies the secret gateway section.
func (s *Service) applyRoutes(m *raydv1.SecretGatewayConfig) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY
	if s.opts.Unsupported != "" {
		return unsupported(sec, s.opts.Unsupported, "the secret gateway needs the root platform: here rayd shares its user with the sandbox's code, which could read the secret")
	}
	routes := make([]gateway.Route, 0, len(m.GetRoutes()))
	env := map[string][2]string{}
	for i, r := range m.GetRoutes() {
		routes = append(routes, gateway.Route{Name: r.GetName(), Upstream: r.GetUpstream(), Headers: headers(r.GetHeaders()),
			Rules: rules(r.GetRules()), RatePerMinute: r.GetRatePerMinute()})
		if v := r.GetEnv(); v != "" {
			if !validEnvName(v) {
				return invalid(sec, fmt.Sprintf("routes[%d].env: not a variable name", i))
			}
			if p := r.GetEnvPath(); p != "" && gateway.CheckPath(p) != nil {
				return invalid(sec, fmt.Sprintf("routes[%d].env_path: not a plain path", i))
			}
			env[r.GetName()] = [2]string{v, r.GetEnvPath()}
		}
	}
	gw, err := s.gatewayLocked()
	if err != nil {
		return failed(sec, ClassFailed, "the gateway could not start")
	}
	if err := gw.SetRoutes(routes); err != nil {
		var ce *gateway.ConfigError
		if errors.As(err, &ce) {
			return invalid(sec, configMessage(err))
		}
		s.log.Warn("secret gateway: routes not applied", "err_class", ClassFailed)
		return failed(sec, ClassFailed, "the routes could not be applied; the previous ones are in force")
	}
	s.routeEnv = env
	s.log.Info("secret gateway configured", "routes", len(routes))
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED, Routes: routeStatus(gw)}
}

// applyPlaceholders applies the placeholders section: the gateway's view
// (validated first: bad input changes nothing), the CA where tools look,
// then the firewall's interception, undoing the gateway's view if the last
// steps fail.
func (s *Service) applyPlaceholders(ctx context.Context, m *raydv1.SecretPlaceholdersConfig) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS
	if s.opts.Unsupported != "" {
		return unsupported(sec, s.opts.Unsupported, "secret placeholders need the root platform: here rayd shares its user with the sandbox's code, which could read the secret")
	}
	if s.opts.Intercept == nil || s.opts.Proxy == nil || s.opts.Trust == nil {
		return unsupported(sec, ClassEgressUnavailable, "secret placeholders need rayd's egress proxy, which does not run in this sandbox")
	}
	phs := make([]gateway.Placeholder, 0, len(m.GetPlaceholders()))
	var vars []string
	var hosts []network.InterceptHost
	for i, p := range m.GetPlaceholders() {
		v := p.GetEnv()
		if !validEnvName(v) {
			return invalid(sec, fmt.Sprintf("placeholders[%d].env: not a variable name", i))
		}
		if p.GetPort() > 65535 {
			return invalid(sec, fmt.Sprintf("placeholders[%d].port: out of range", i))
		}
		ph := s.phs[v]
		if ph == "" {
			ph = newPlaceholder()
		}
		port := uint16(p.GetPort())
		if port == 0 {
			port = 443
		}
		phs = append(phs, gateway.Placeholder{Name: v, Placeholder: ph, Secret: p.GetSecret(), Host: p.GetHost(),
			Port: port, Rules: rules(p.GetRules()), RatePerMinute: p.GetRatePerMinute()})
		vars = append(vars, v)
		h := network.InterceptHost{Host: p.GetHost(), Port: port, Grant: true}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	hrs := make([]gateway.HeaderRule, 0, len(m.GetHeaderRules()))
	for i, r := range m.GetHeaderRules() {
		if r.GetPort() > 65535 {
			return invalid(sec, fmt.Sprintf("header_rules[%d].port: out of range", i))
		}
		port := uint16(r.GetPort())
		if port == 0 {
			port = 443
		}
		hrs = append(hrs, gateway.HeaderRule{Host: r.GetHost(), Port: port, Headers: headers(r.GetHeaders())})
		h := network.InterceptHost{Host: r.GetHost(), Port: port}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	gw, err := s.gatewayLocked()
	if err != nil {
		return failed(sec, ClassFailed, "the gateway could not start")
	}
	previous, previousRules := s.phConfig, s.hrConfig
	if err := gw.SetPlaceholders(phs); err != nil {
		return invalid(sec, configMessage(err))
	}
	if err := gw.SetHeaderRules(hrs); err != nil {
		_ = gw.SetPlaceholders(previous)
		return invalid(sec, configMessage(err))
	}
	undo := func() {
		_ = gw.SetPlaceholders(previous)
		_ = gw.SetHeaderRules(previousRules)
	}
	if len(phs) > 0 || len(hrs) > 0 {
		if err := s.opts.Trust.Install(gw.CACertPEM()); err != nil {
			undo()
			s.log.Warn("secret placeholders: the CA could not be installed", "err_class", ClassFailed)
			return failed(sec, ClassFailed, "the sandbox's CA could not be installed; the previous placeholders are in force")
		}
	}
	if err := s.opts.Intercept.SetIntercept(ctx, hosts); err != nil {
		undo()
		s.log.Warn("secret placeholders: interception not installed", "err_class", ClassEgressUnavailable)
		return failed(sec, ClassEgressUnavailable, "the interception could not be installed; the previous placeholders are in force")
	}
	for _, p := range phs {
		s.phs[p.Name] = p.Placeholder
	}
	s.phActive, s.phConfig, s.hrConfig = vars, phs, hrs
	s.log.Info("secret placeholders configured", "placeholders", len(phs), "header_rules", len(hrs))
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED, Placeholders: s.placeholderStatus(gw)}
}

// validEnvName: [A-Za-z_][A-Za-z0-9_]{0,127}.
func validEnvName(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for i, c := range []byte(v) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
