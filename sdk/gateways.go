package rayito

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// GatewayEndpoint is a configured route of the sandbox's secret gateway
// (sdk/secrets configures them).
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

// gatewayState is what the sandbox knows of its secret gateway: the
// routes and placeholders in force, as rayd reported them.
type gatewayState struct {
	mu     sync.Mutex
	routes map[string]uint16 // name -> port
	values map[string]string // variable -> placeholder
}

// Gateway returns the route named name, or nil when the sandbox has none of
// that name (its methods then answer zero values).
func (s *Sandbox) Gateway(name string) *GatewayEndpoint {
	s.gateways.mu.Lock()
	defer s.gateways.mu.Unlock()
	port, ok := s.gateways.routes[name]
	if !ok {
		return nil
	}
	return &GatewayEndpoint{name: name, port: port}
}

// Gateways returns the sandbox's routes, sorted by name.
func (s *Sandbox) Gateways() []*GatewayEndpoint {
	s.gateways.mu.Lock()
	defer s.gateways.mu.Unlock()
	var out []*GatewayEndpoint
	for _, name := range slices.Sorted(maps.Keys(s.gateways.routes)) {
		out = append(out, &GatewayEndpoint{name: name, port: s.gateways.routes[name]})
	}
	return out
}

// Placeholder returns the placeholder the sandbox sees in the variable env
// ("" when none): not a secret.
func (s *Sandbox) Placeholder(env string) string {
	s.gateways.mu.Lock()
	defer s.gateways.mu.Unlock()
	return s.gateways.values[env]
}

// Placeholders returns the sandbox's placeholders in force: variable ->
// placeholder (none: an empty map). Not secrets.
func (s *Sandbox) Placeholders() map[string]string {
	s.gateways.mu.Lock()
	defer s.gateways.mu.Unlock()
	out := maps.Clone(s.gateways.values)
	if out == nil {
		out = map[string]string{}
	}
	return out
}

// recordAll keeps the routes and placeholders of the applied gateway and
// placeholders sections of results.
func (st *gatewayState) recordAll(results []*raydv1.SectionResult) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range results {
		if r.GetCode() == raydv1.SectionCode_SECTION_CODE_APPLIED {
			st.record(r)
		}
	}
}

// record keeps the routes and placeholders a result reports.
func (st *gatewayState) record(r *raydv1.SectionResult) {
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

// loadGateways learns the routes and placeholders in force (Connect): a
// rayd without the service has none.
func (s *Sandbox) loadGateways(ctx context.Context) {
	resp, err := s.dp.config.ConfigureStatus(ctx, connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
	if err != nil {
		s.cfg.logger.Debug("rayito: no gateway status", slog.String("sandbox_id", s.id), slog.String("code", connect.CodeOf(err).String()))
		return
	}
	s.gateways.recordAll(resp.Msg.GetSections())
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

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
