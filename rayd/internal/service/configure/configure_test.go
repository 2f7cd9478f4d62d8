package configure

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/rayito-dev/rayito/gateway"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/service/network"
)

const (
	canary  = "sk-CANARY-configure-0123456789abcdef"
	canary2 = "sk-CANARY-refreshed-fedcba9876543210"
	upName  = "upstream.test"
)

const (
	secGateway = raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY
	secPH      = raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS
	codeOK     = raydv1.SectionCode_SECTION_CODE_APPLIED
	codeUnsupp = raydv1.SectionCode_SECTION_CODE_UNSUPPORTED
	codeInval  = raydv1.SectionCode_SECTION_CODE_INVALID
	codeFailed = raydv1.SectionCode_SECTION_CODE_FAILED
)

var placeholderRE = regexp.MustCompile(`^RAYITO-PLACEHOLDER-[0-9a-f]{32}$`)

// Fakes.

type fakeIntercept struct {
	mu    sync.Mutex
	calls [][]network.InterceptHost
	err   error
}

func (f *fakeIntercept) SetIntercept(_ context.Context, hosts []network.InterceptHost) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(hosts))
	return f.err
}

func (f *fakeIntercept) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeIntercept) snapshot() [][]network.InterceptHost {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

type fakeProxy struct {
	mu  sync.Mutex
	got []egress.Interceptor
}

func (f *fakeProxy) SetInterceptor(i egress.Interceptor) {
	f.mu.Lock()
	f.got = append(f.got, i)
	f.mu.Unlock()
}

func (f *fakeProxy) snapshot() []egress.Interceptor {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

var trustEnv = map[string]string{"SSL_CERT_FILE": "/run/test/bundle.pem", "NODE_EXTRA_CA_CERTS": "/run/test/ca.pem"}

type fakeTrust struct {
	mu   sync.Mutex
	pems [][]byte
	err  error
}

func (f *fakeTrust) Install(caPEM []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pems = append(f.pems, bytes.Clone(caPEM))
	return f.err
}

func (f *fakeTrust) Env() map[string]string { return maps.Clone(trustEnv) }

func (f *fakeTrust) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeTrust) snapshot() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pems)
}

type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// upstream is an HTTPS server with a certificate for upstream.test that
// records the requests' headers.
type upstream struct {
	srv  *httptest.Server
	pool *x509.CertPool
	port int

	mu   sync.Mutex
	reqs []*http.Request
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: upName},
		DNSNames:              []string{upName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{pool: x509.NewCertPool()}
	u.pool.AddCert(cert)
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(context.Background()))
		u.mu.Unlock()
		io.WriteString(w, "upstream-ok")
	}))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.port = u.srv.Listener.Addr().(*net.TCPAddr).Port
	return u
}

func (u *upstream) url() string { return "https://" + upName + ":" + strconv.Itoa(u.port) }

func (u *upstream) last(t *testing.T) *http.Request {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// harness is a service under test with its fakes.
type harness struct {
	t    *testing.T
	s    *Service
	st   *sandbox.State
	ic   *fakeIntercept
	px   *fakeProxy
	tr   *fakeTrust
	up   *upstream
	logs *logBuf

	mu    sync.Mutex
	texts []string // every response, formatted
}

func bootedState(t *testing.T) *sandbox.State {
	t.Helper()
	st := sandbox.New(sandbox.Options{})
	raw, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	st.Run(context.Background(), "microvm-test", raw)
	if st.Boot() == nil {
		t.Fatal("the sandbox did not boot")
	}
	return st
}

// newHarness returns a booted service; mod may change the options.
func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, st: bootedState(t), ic: &fakeIntercept{}, px: &fakeProxy{}, tr: &fakeTrust{},
		up: newUpstream(t), logs: &logBuf{}}
	opts := Options{
		State:     h.st,
		Intercept: h.ic,
		Proxy:     h.px,
		Trust:     h.tr,
		Gateway: func() gateway.Options {
			return gateway.Options{
				Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
					if host == upName {
						return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
					}
					return nil, errors.New("no such host")
				},
				Blocked: func(netip.Addr) bool { return false },
				RootCAs: h.up.pool,
			}
		},
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&opts)
	}
	h.s = New(opts)
	t.Cleanup(func() {
		// The canary never leaves the gateway's memory: not in any
		// response, nor the status, nor the variables, nor the logs.
		if st, err := h.s.ConfigureStatus(context.Background(), connect.NewRequest(&raydv1.ConfigureStatusRequest{})); err == nil {
			h.record(st.Msg)
		}
		h.record(fmt.Sprint(h.s.Env()))
		h.s.Close()
		h.mu.Lock()
		texts := slices.Clone(h.texts)
		h.mu.Unlock()
		texts = append(texts, h.logs.String())
		for _, s := range texts {
			for _, c := range []string{canary, canary2} {
				if strings.Contains(s, c) {
					t.Errorf("a secret leaked: %q", s)
				}
			}
		}
	})
	return h
}

func (h *harness) record(v any) {
	var s string
	switch m := v.(type) {
	case proto.Message:
		s = fmt.Sprintf("%v|%+v|%s", m, m, m)
	default:
		s = fmt.Sprint(v)
	}
	h.mu.Lock()
	h.texts = append(h.texts, s)
	h.mu.Unlock()
}

func (h *harness) configure(req *raydv1.ConfigureRequest) *raydv1.ConfigureResponse {
	h.t.Helper()
	resp, err := h.s.Configure(context.Background(), connect.NewRequest(req))
	if err != nil {
		h.t.Fatalf("Configure: %v", err)
	}
	h.record(resp.Msg)
	return resp.Msg
}

// one configures req and returns its only result.
func (h *harness) one(req *raydv1.ConfigureRequest) *raydv1.SectionResult {
	h.t.Helper()
	resp := h.configure(req)
	if len(resp.Results) != 1 {
		h.t.Fatalf("results %v", resp.Results)
	}
	return resp.Results[0]
}

func (h *harness) status() *raydv1.ConfigureStatusResponse {
	h.t.Helper()
	resp, err := h.s.ConfigureStatus(context.Background(), connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
	if err != nil {
		h.t.Fatalf("ConfigureStatus: %v", err)
	}
	h.record(resp.Msg)
	return resp.Msg
}

func (h *harness) section(sec raydv1.ConfigSection) *raydv1.SectionResult {
	h.t.Helper()
	for _, r := range h.status().Sections {
		if r.Section == sec {
			return r
		}
	}
	h.t.Fatalf("no status for %v", sec)
	return nil
}

func wantCode(t *testing.T, r *raydv1.SectionResult, sec raydv1.ConfigSection, code raydv1.SectionCode, class string) {
	t.Helper()
	if r.Section != sec || r.Code != code || r.ErrorClass != class {
		t.Fatalf("result %v, want %v %v %q", r, sec, code, class)
	}
}

func apiRoute(h *harness, name, secret string) *raydv1.GatewayRoute {
	return &raydv1.GatewayRoute{
		Name:     name,
		Upstream: h.up.url(),
		Headers:  []*raydv1.GatewayHeader{{Name: "x-api-key", Secret: secret}},
		Rules:    []*raydv1.GatewayRule{{Method: "*", Path: "/*"}},
		Env:      "API_URL",
		EnvPath:  "/v1",
	}
}

func routesReq(rs ...*raydv1.GatewayRoute) *raydv1.ConfigureRequest {
	return &raydv1.ConfigureRequest{SecretGateway: &raydv1.SecretGatewayConfig{Routes: rs}}
}

func phReq(ps ...*raydv1.SecretPlaceholder) *raydv1.ConfigureRequest {
	return &raydv1.ConfigureRequest{SecretPlaceholders: &raydv1.SecretPlaceholdersConfig{Placeholders: ps}}
}

// get sends a GET to url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func reasonOf(err error) raydv1.ErrorReason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
	}
	return rpcerr.ReasonOf(ce)
}

func TestUnauthenticatedBeforeBoot(t *testing.T) {
	ic, px, tr := &fakeIntercept{}, &fakeProxy{}, &fakeTrust{}
	s := New(Options{State: sandbox.New(sandbox.Options{}), Intercept: ic, Proxy: px, Trust: tr})
	defer s.Close()
	_, err := s.Configure(context.Background(), connect.NewRequest(&raydv1.ConfigureRequest{
		SecretPlaceholders: &raydv1.SecretPlaceholdersConfig{Placeholders: []*raydv1.SecretPlaceholder{{Env: "K", Secret: canary, Host: "secret.test"}}},
	}))
	if reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED {
		t.Fatalf("Configure before boot: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), canary) {
		t.Fatalf("error names the secret: %v", err)
	}
	_, err = s.ConfigureStatus(context.Background(), connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
	if reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED {
		t.Fatalf("ConfigureStatus before boot: %v", err)
	}
	if len(ic.snapshot()) != 0 || len(px.snapshot()) != 0 || len(tr.snapshot()) != 0 || s.Env() != nil {
		t.Fatal("something was applied before boot")
	}
}

func TestRouteAppliedAndServed(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.configure(routesReq(apiRoute(h, "api", canary)))
	if len(resp.Results) != 1 || resp.ConfigGeneration != 1 {
		t.Fatalf("response %v", resp)
	}
	r := resp.Results[0]
	wantCode(t, r, secGateway, codeOK, "")
	if len(r.Routes) != 1 || r.Routes[0].Name != "api" || r.Routes[0].Port == 0 {
		t.Fatalf("routes %v", r.Routes)
	}
	port := r.Routes[0].Port

	st := h.section(secGateway)
	if st.Code != codeOK || len(st.Routes) != 1 || st.Routes[0].Port != port || st.Routes[0].Name != "api" {
		t.Fatalf("status %v", st)
	}

	env := h.s.Env()
	wantURL := "http://127.0.0.1:" + strconv.Itoa(int(port)) + "/v1"
	if env["API_URL"] != wantURL || len(env) != 1 {
		t.Fatalf("Env %v, want API_URL=%s", env, wantURL)
	}

	code, body := get(t, env["API_URL"]+"/models?x=1")
	if code != 200 || body != "upstream-ok" {
		t.Fatalf("through the route: %d %q", code, body)
	}
	got := h.up.last(t)
	if v := got.Header.Get("X-Api-Key"); v != canary {
		t.Fatalf("upstream got x-api-key %q", v)
	}
	if got.URL.Path != "/v1/models" {
		t.Errorf("upstream path %q", got.URL.Path)
	}
	if st := h.section(secGateway); st.Routes[0].Requests != 1 {
		t.Errorf("status after a request: %v", st)
	}
	// No placeholders: no CA installed, no interception asked.
	if len(h.tr.snapshot()) != 0 || len(h.ic.snapshot()) != 0 {
		t.Errorf("routes touched the placeholders' side: %d %d", len(h.tr.snapshot()), len(h.ic.snapshot()))
	}
}

func TestRouteRefreshAndInvalidKeepPrevious(t *testing.T) {
	h := newHarness(t, nil)
	r := h.one(routesReq(apiRoute(h, "api", canary)))
	wantCode(t, r, secGateway, codeOK, "")
	port := r.Routes[0].Port

	// Refresh: same name, new secret, same port, the new secret injected.
	r = h.one(routesReq(apiRoute(h, "api", canary2)))
	wantCode(t, r, secGateway, codeOK, "")
	if len(r.Routes) != 1 || r.Routes[0].Port != port {
		t.Fatalf("refresh moved the route: %v (was port %d)", r.Routes, port)
	}
	envBefore := h.s.Env()
	get(t, envBefore["API_URL"]+"/a")
	if v := h.up.last(t).Header.Get("X-Api-Key"); v != canary2 {
		t.Fatalf("after refresh the upstream got %q", v)
	}

	nine := make([]*raydv1.GatewayRoute, 9)
	for i := range nine {
		nine[i] = apiRoute(h, "r"+strconv.Itoa(i), canary)
		nine[i].Env = ""
	}
	for _, tc := range []struct {
		name   string
		routes []*raydv1.GatewayRoute
		field  string
	}{
		{"bad name", []*raydv1.GatewayRoute{apiRoute(h, "Bad Name", canary)}, "routes[0].name"},
		{"header Host", []*raydv1.GatewayRoute{func() *raydv1.GatewayRoute {
			x := apiRoute(h, "api", canary)
			x.Headers = []*raydv1.GatewayHeader{{Name: "Host", Secret: canary}}
			return x
		}()}, "routes[0].headers[0].name"},
		{"upstream with a path", []*raydv1.GatewayRoute{func() *raydv1.GatewayRoute {
			x := apiRoute(h, "api", canary)
			x.Upstream = h.up.url() + "/v1"
			return x
		}()}, "routes[0].upstream"},
		{"nine routes", nine, "routes"},
		{"bad env", []*raydv1.GatewayRoute{func() *raydv1.GatewayRoute {
			x := apiRoute(h, "api", canary)
			x.Env = "1BAD"
			return x
		}()}, "routes[0].env"},
		{"second route invalid", []*raydv1.GatewayRoute{apiRoute(h, "api", canary), func() *raydv1.GatewayRoute {
			x := apiRoute(h, "other", canary)
			x.Env = ""
			x.Rules = nil
			return x
		}()}, "routes[1].rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.one(routesReq(tc.routes...))
			wantCode(t, r, secGateway, codeInval, ClassInvalid)
			if !strings.Contains(r.Message, tc.field) {
				t.Errorf("message %q does not name %s", r.Message, tc.field)
			}
			if strings.Contains(r.Message, canary) || strings.Contains(r.Message, h.up.url()) {
				t.Errorf("message carries a value: %q", r.Message)
			}
			// The previous routes are still running unchanged.
			st := h.section(secGateway)
			if st.Code != codeInval || len(st.Routes) != 1 || st.Routes[0].Name != "api" || st.Routes[0].Port != port {
				t.Fatalf("status after an invalid section: %v", st)
			}
			if env := h.s.Env(); !maps.Equal(env, envBefore) {
				t.Fatalf("Env changed: %v, was %v", env, envBefore)
			}
			n := h.up.count()
			if code, _ := get(t, envBefore["API_URL"]+"/b"); code != 200 || h.up.count() != n+1 {
				t.Fatalf("the previous route stopped: %d", code)
			}
			if v := h.up.last(t).Header.Get("X-Api-Key"); v != canary2 {
				t.Fatalf("the previous route changed secret: %q", v)
			}
		})
	}
}

func TestRequestIDIdempotent(t *testing.T) {
	h := newHarness(t, nil)
	req := phReq(&raydv1.SecretPlaceholder{Env: "KEY", Secret: canary, Host: "secret.test"})
	req.RequestId = "req-1"
	first := h.configure(req)
	if first.ConfigGeneration != 1 || first.Results[0].Code != codeOK {
		t.Fatalf("first %v", first)
	}
	// The same id again, even with other content: the same answer, and
	// nothing applied.
	again := phReq(&raydv1.SecretPlaceholder{Env: "OTHER", Secret: canary2, Host: "other.test"})
	again.RequestId = "req-1"
	again.SecretGateway = &raydv1.SecretGatewayConfig{Routes: []*raydv1.GatewayRoute{apiRoute(h, "api", canary)}}
	second := h.configure(again)
	if !proto.Equal(first, second) {
		t.Fatalf("second answer %v, first %v", second, first)
	}
	if n := len(h.ic.snapshot()); n != 1 {
		t.Errorf("SetIntercept called %d times", n)
	}
	if n := len(h.tr.snapshot()); n != 1 {
		t.Errorf("Install called %d times", n)
	}
	if st := h.status(); st.ConfigGeneration != 1 || len(st.Sections) != 1 {
		t.Errorf("status %v", st)
	}
	if env := h.s.Env(); env["OTHER"] != "" || env["API_URL"] != "" || env["KEY"] == "" {
		t.Errorf("Env %v", env)
	}
	// A new id applies.
	again.RequestId = "req-2"
	third := h.configure(again)
	if third.ConfigGeneration != 2 || len(third.Results) != 2 {
		t.Fatalf("third %v", third)
	}
	// No id: applied every time.
	again.RequestId = ""
	if g := h.configure(again).ConfigGeneration; g != 3 {
		t.Errorf("generation %d", g)
	}
	if g := h.configure(again).ConfigGeneration; g != 4 {
		t.Errorf("generation %d", g)
	}
}

func TestSectionsNotBuilt(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.configure(&raydv1.ConfigureRequest{
		S3Mounts:        &raydv1.S3MountsConfig{},
		EfsVolumes:      &raydv1.EfsVolumesConfig{},
		LifecycleEvents: &raydv1.LifecycleEventsConfig{},
		TelemetryExport: &raydv1.TelemetryExportConfig{},
	})
	want := []raydv1.ConfigSection{
		raydv1.ConfigSection_CONFIG_SECTION_LIFECYCLE_EVENTS,
		raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT,
		raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS,
		raydv1.ConfigSection_CONFIG_SECTION_EFS_VOLUMES,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("results %v", resp.Results)
	}
	for i, r := range resp.Results {
		wantCode(t, r, want[i], codeUnsupp, ClassNotBuilt)
	}
	if st := h.status(); len(st.Sections) != 4 || st.ConfigGeneration != 1 {
		t.Errorf("status %v", st)
	}
	// An empty request changes nothing.
	if resp := h.configure(&raydv1.ConfigureRequest{}); len(resp.Results) != 0 || resp.ConfigGeneration != 1 {
		t.Errorf("empty request: %v", resp)
	}
}

func TestUnsupportedIsolation(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Unsupported = ClassIsolation })
	if h.s.SecretGatewaySupported() {
		t.Error("SecretGatewaySupported under isolation")
	}
	req := routesReq(apiRoute(h, "api", canary))
	req.SecretPlaceholders = &raydv1.SecretPlaceholdersConfig{Placeholders: []*raydv1.SecretPlaceholder{{Env: "KEY", Secret: canary, Host: "secret.test"}}}
	resp := h.configure(req)
	if len(resp.Results) != 2 {
		t.Fatalf("results %v", resp.Results)
	}
	wantCode(t, resp.Results[0], secGateway, codeUnsupp, ClassIsolation)
	wantCode(t, resp.Results[1], secPH, codeUnsupp, ClassIsolation)
	if h.s.Env() != nil || h.s.gw != nil {
		t.Errorf("a gateway was made: %v", h.s.Env())
	}
	if len(h.ic.snapshot()) != 0 || len(h.px.snapshot()) != 0 || len(h.tr.snapshot()) != 0 {
		t.Error("the fakes were called")
	}
}

func TestPlaceholdersWithoutEgress(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Intercept = nil })
	if !h.s.SecretGatewaySupported() {
		t.Error("SecretGatewaySupported")
	}
	req := phReq(&raydv1.SecretPlaceholder{Env: "KEY", Secret: canary, Host: "secret.test"})
	req.SecretGateway = &raydv1.SecretGatewayConfig{Routes: []*raydv1.GatewayRoute{apiRoute(h, "api", canary)}}
	resp := h.configure(req)
	wantCode(t, resp.Results[0], secGateway, codeOK, "")
	wantCode(t, resp.Results[1], secPH, codeUnsupp, ClassEgressUnavailable)
	if env := h.s.Env(); env["KEY"] != "" || env["API_URL"] == "" {
		t.Errorf("Env %v", env)
	}
	if len(h.tr.snapshot()) != 0 {
		t.Error("the CA was installed")
	}
}

func TestPlaceholders(t *testing.T) {
	h := newHarness(t, nil)
	r := h.one(phReq(&raydv1.SecretPlaceholder{Env: "OPENAI_API_KEY", Secret: canary, Host: "secret.test"}))
	wantCode(t, r, secPH, codeOK, "")
	if len(r.Placeholders) != 1 || r.Placeholders[0].Env != "OPENAI_API_KEY" || !placeholderRE.MatchString(r.Placeholders[0].Placeholder) {
		t.Fatalf("placeholders %v", r.Placeholders)
	}
	ph := r.Placeholders[0].Placeholder

	if calls := h.ic.snapshot(); len(calls) != 1 || !slices.Equal(calls[0], []network.InterceptHost{{Host: "secret.test", Port: 443, Grant: true}}) {
		t.Fatalf("SetIntercept calls %v", calls)
	}
	gws := h.px.snapshot()
	if len(gws) != 1 || gws[0] != egress.Interceptor(h.s.gw) || !gws[0].Intercepts("secret.test", 443) {
		t.Fatalf("the proxy got %v", gws)
	}
	pems := h.tr.snapshot()
	if len(pems) != 1 || !bytes.Equal(pems[0], h.s.gw.CACertPEM()) {
		t.Fatalf("Trust got %d PEMs", len(pems))
	}
	blk, _ := pem.Decode(pems[0])
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate")
	}
	if ca, err := x509.ParseCertificate(blk.Bytes); err != nil || !ca.IsCA {
		t.Fatalf("not a CA: %v", err)
	}
	env := h.s.Env()
	want := maps.Clone(trustEnv)
	want["OPENAI_API_KEY"] = ph
	if !maps.Equal(env, want) {
		t.Fatalf("Env %v, want %v", env, want)
	}
	st := h.section(secPH)
	if st.Code != codeOK || len(st.Placeholders) != 1 || st.Placeholders[0].Placeholder != ph {
		t.Fatalf("status %v", st)
	}

	// Refresh of the same variable: the same placeholder; a new variable
	// gets a new one.
	r = h.one(phReq(
		&raydv1.SecretPlaceholder{Env: "OPENAI_API_KEY", Secret: canary2, Host: "secret.test"},
		&raydv1.SecretPlaceholder{Env: "OTHER_KEY", Secret: canary, Host: "other.test", Port: 8443},
	))
	wantCode(t, r, secPH, codeOK, "")
	byEnv := map[string]string{}
	for _, p := range r.Placeholders {
		byEnv[p.Env] = p.Placeholder
	}
	if byEnv["OPENAI_API_KEY"] != ph {
		t.Errorf("refresh changed the placeholder: %q -> %q", ph, byEnv["OPENAI_API_KEY"])
	}
	other := byEnv["OTHER_KEY"]
	if !placeholderRE.MatchString(other) || other == ph {
		t.Errorf("new variable's placeholder %q", other)
	}
	calls := h.ic.snapshot()
	if len(calls) != 2 || !slices.Equal(calls[1], []network.InterceptHost{{Host: "secret.test", Port: 443, Grant: true}, {Host: "other.test", Port: 8443, Grant: true}}) {
		t.Fatalf("SetIntercept calls %v", calls)
	}
	if n := len(h.px.snapshot()); n != 1 {
		t.Errorf("SetInterceptor called %d times (one gateway)", n)
	}
	want["OTHER_KEY"] = other
	if env := h.s.Env(); !maps.Equal(env, want) {
		t.Fatalf("Env %v, want %v", env, want)
	}
	inForce := h.s.gw.Placeholders()

	checkUnchanged := func(t *testing.T) {
		t.Helper()
		if env := h.s.Env(); !maps.Equal(env, want) {
			t.Errorf("Env %v, want %v", env, want)
		}
		got := h.s.gw.Placeholders()
		if len(got) != len(inForce) {
			t.Fatalf("gateway placeholders %v, want %v", got, inForce)
		}
		for i := range got {
			if got[i].Name != inForce[i].Name {
				t.Errorf("gateway placeholders %v, want %v", got, inForce)
			}
		}
		if h.s.gw.Intercepts("third.test", 443) || !h.s.gw.Intercepts("secret.test", 443) || !h.s.gw.Intercepts("other.test", 8443) {
			t.Error("the gateway's interception changed")
		}
	}
	third := phReq(
		&raydv1.SecretPlaceholder{Env: "OPENAI_API_KEY", Secret: canary2, Host: "secret.test"},
		&raydv1.SecretPlaceholder{Env: "THIRD_KEY", Secret: canary, Host: "third.test"},
	)

	t.Run("trust failure", func(t *testing.T) {
		h.tr.setErr(errors.New("mount failed"))
		defer h.tr.setErr(nil)
		n := len(h.ic.snapshot())
		r := h.one(third)
		wantCode(t, r, secPH, codeFailed, ClassFailed)
		if len(h.ic.snapshot()) != n {
			t.Error("interception installed after the CA failed")
		}
		checkUnchanged(t)
	})
	t.Run("intercept failure", func(t *testing.T) {
		h.ic.setErr(errors.New("nft failed"))
		defer h.ic.setErr(nil)
		r := h.one(third)
		wantCode(t, r, secPH, codeFailed, ClassEgressUnavailable)
		checkUnchanged(t)
	})
	for _, tc := range []struct {
		name  string
		p     *raydv1.SecretPlaceholder
		field string
	}{
		{"IP host", &raydv1.SecretPlaceholder{Env: "THIRD_KEY", Secret: canary, Host: "10.0.0.1"}, "placeholders[1].host"},
		{"bad env", &raydv1.SecretPlaceholder{Env: "1BAD", Secret: canary, Host: "third.test"}, "placeholders[1].env"},
		{"port", &raydv1.SecretPlaceholder{Env: "THIRD_KEY", Secret: canary, Host: "third.test", Port: 70000}, "placeholders[1].port"},
		{"upper-case host", &raydv1.SecretPlaceholder{Env: "THIRD_KEY", Secret: canary, Host: "Third.test"}, "placeholders[1].host"},
	} {
		t.Run("invalid "+tc.name, func(t *testing.T) {
			ni, nt := len(h.ic.snapshot()), len(h.tr.snapshot())
			r := h.one(phReq(&raydv1.SecretPlaceholder{Env: "OPENAI_API_KEY", Secret: canary2, Host: "secret.test"}, tc.p))
			wantCode(t, r, secPH, codeInval, ClassInvalid)
			if !strings.Contains(r.Message, tc.field) {
				t.Errorf("message %q does not name %s", r.Message, tc.field)
			}
			if strings.Contains(r.Message, canary) {
				t.Errorf("message carries the secret: %q", r.Message)
			}
			if len(h.ic.snapshot()) != ni || len(h.tr.snapshot()) != nt {
				t.Error("an invalid section reached Trust or Intercept")
			}
			checkUnchanged(t)
		})
	}

	// After the failures, the same change applies, and the placeholders
	// of the variables in force are still the same.
	r = h.one(third)
	wantCode(t, r, secPH, codeOK, "")
	byEnv = map[string]string{}
	for _, p := range r.Placeholders {
		byEnv[p.Env] = p.Placeholder
	}
	if byEnv["OPENAI_API_KEY"] != ph || !placeholderRE.MatchString(byEnv["THIRD_KEY"]) || byEnv["THIRD_KEY"] == other || len(byEnv) != 2 {
		t.Errorf("placeholders %v", byEnv)
	}
	if env := h.s.Env(); env["OTHER_KEY"] != "" || env["THIRD_KEY"] != byEnv["THIRD_KEY"] {
		t.Errorf("Env %v", env)
	}

	// Removing every placeholder drops them and the trust variables.
	r = h.one(phReq())
	wantCode(t, r, secPH, codeOK, "")
	if env := h.s.Env(); len(env) != 0 {
		t.Errorf("Env after removing all %v", env)
	}
	if calls := h.ic.snapshot(); len(calls[len(calls)-1]) != 0 {
		t.Errorf("last SetIntercept %v", calls[len(calls)-1])
	}
}

// TestPlaceholderEndToEnd drives the interceptor the proxy was given: a
// TLS client trusting the CA handed to Trust sends the placeholder, and
// the upstream receives the secret.
func TestPlaceholderEndToEnd(t *testing.T) {
	h := newHarness(t, nil)
	r := h.one(phReq(&raydv1.SecretPlaceholder{Env: "KEY", Secret: canary, Host: upName, Port: uint32(h.up.port)}))
	wantCode(t, r, secPH, codeOK, "")
	ph := h.s.Env()["KEY"]
	ic := h.px.snapshot()[0]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(h.tr.snapshot()[0]) {
		t.Fatal("bad CA PEM")
	}
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ic.ServeIntercepted(context.Background(), server, nil, upName, uint16(h.up.port))
	}()
	defer func() {
		client.Close()
		<-done
	}()
	client.SetDeadline(time.Now().Add(20 * time.Second))
	tc := tls.Client(client, &tls.Config{ServerName: upName, RootCAs: pool})
	io.WriteString(tc, "GET /v1/x HTTP/1.1\r\nHost: "+upName+"\r\nAuthorization: Bearer "+ph+"\r\nConnection: close\r\n\r\n")
	b, err := io.ReadAll(tc)
	if err != nil && !errors.Is(err, io.EOF) && len(b) == 0 {
		t.Fatalf("read: %v", err)
	}
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") || !strings.HasSuffix(string(b), "upstream-ok") {
		t.Fatalf("answer %q", b)
	}
	if v := h.up.last(t).Header.Get("Authorization"); v != "Bearer "+canary {
		t.Fatalf("upstream got Authorization %q", v)
	}
	if st := h.section(secPH); len(st.Placeholders) != 1 || st.Placeholders[0].Injected != 1 {
		t.Errorf("status %v", st)
	}
}

// TestHeaderRules: header rules (E2B's network rules) are intercepted
// without a grant, need the CA, leave no value in any answer, and a bad
// rule changes nothing.
func TestHeaderRules(t *testing.T) {
	h := newHarness(t, nil)
	rule := &raydv1.HeaderRule{Host: "*.api.test", Headers: []*raydv1.GatewayHeader{{Name: "Authorization", Prefix: "Bearer ", Secret: canary}}}
	r := h.one(&raydv1.ConfigureRequest{SecretPlaceholders: &raydv1.SecretPlaceholdersConfig{HeaderRules: []*raydv1.HeaderRule{rule}}})
	wantCode(t, r, secPH, codeOK, "")
	if calls := h.ic.snapshot(); len(calls) != 1 || !slices.Equal(calls[0], []network.InterceptHost{{Host: "*.api.test", Port: 443}}) {
		t.Fatalf("SetIntercept calls %v: want the rule's host, not granted", calls)
	}
	if n := len(h.tr.snapshot()); n != 1 {
		t.Fatalf("CA installs %d, want 1", n)
	}
	if !h.s.gw.Intercepts("v1.api.test", 443) || h.s.gw.Grants("v1.api.test", 443) {
		t.Fatal("the gateway does not intercept the rule's host, or grants it")
	}
	if strings.Contains(r.String(), canary) {
		t.Fatal("the answer carries the rule's value")
	}
	// A bad rule: INVALID naming the field, the previous rules in force.
	bad := &raydv1.HeaderRule{Host: "*", Headers: rule.Headers}
	r = h.one(&raydv1.ConfigureRequest{RequestId: "2", SecretPlaceholders: &raydv1.SecretPlaceholdersConfig{HeaderRules: []*raydv1.HeaderRule{bad}}})
	if r.GetCode() != raydv1.SectionCode_SECTION_CODE_INVALID || !strings.Contains(r.GetMessage(), "header_rules[0].host") || strings.Contains(r.String(), canary) {
		t.Fatalf("bad rule: %v", r)
	}
	if !h.s.gw.Intercepts("v1.api.test", 443) {
		t.Fatal("a refused change removed the rules in force")
	}
}
