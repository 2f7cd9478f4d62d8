package microvmstest_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

func port(p int) microvmsapi.AllowedPort { return microvmsapi.AllowedPort{Port: &p} }

func TestAuthTokenValidation(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)
	m := run(t, c, s.AddImage("app"))
	_, err := c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 0, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	if k, _ := microvms.KindOf(err); k != microvms.KindInvalidArgument {
		t.Fatalf("client-side refusal: %v", err)
	}
	for _, body := range []string{
		`{"expirationInMinutes":61,"allowedPorts":[{"port":8080}]}`,
		`{"expirationInMinutes":0,"allowedPorts":[{"port":8080}]}`,
		`{"expirationInMinutes":5,"allowedPorts":[]}`,
		`{"expirationInMinutes":5,"allowedPorts":[{"port":0}]}`,
		`{"expirationInMinutes":5,"allowedPorts":[{"port":65536}]}`,
		`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":9,"endPort":8}}]}`,
		`{"expirationInMinutes":5,"allowedPorts":[{"port":1,"allPorts":{}}]}`,
		`{"expirationInMinutes":5,"allowedPorts":[{}]}`,
	} {
		r := raw(t, s, http.MethodPost, microvmsapi.AuthTokenPath(m.MicrovmID), []byte(body), false)
		if r.status != 400 || r.exception != microvmsapi.ValidationException {
			t.Fatalf("%s: %d %s", body, r.status, r.exception)
		}
	}
	// allPorts and ranges are accepted by the service (the SDK refuses
	// those covering 9000 itself).
	r := raw(t, s, http.MethodPost, microvmsapi.AuthTokenPath(m.MicrovmID), []byte(`{"expirationInMinutes":5,"allowedPorts":[{"allPorts":{}}]}`), false)
	if r.status != 200 {
		t.Fatalf("allPorts: %d %s", r.status, r.body)
	}
	var out microvmsapi.CreateMicrovmAuthTokenOutput
	if err := json.Unmarshal(r.body, &out); err != nil || out.AuthToken[microvmsapi.AuthTokenResponseKey] == "" {
		t.Fatalf("answer %s", r.body)
	}
	_, err = c.CreateMicrovmAuthToken(ctx, "microvm-nope", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
	_ = c.TerminateMicrovm(ctx, m.MicrovmID)
	_, err = c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	wantErr(t, err, microvmsapi.ConflictException, 409)
}

func TestShellAuthToken(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)
	arn := s.AddImage("app")
	plain := run(t, c, arn)
	_, err := c.CreateMicrovmShellAuthToken(ctx, plain.MicrovmID, &microvmsapi.CreateMicrovmShellAuthTokenInput{ExpirationInMinutes: 5})
	wantErr(t, err, microvmsapi.ValidationException, 400)
	shell, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, IngressNetworkConnectors: []string{s.ConnectorARN(microvmsapi.ConnectorShellIngress)}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateMicrovmShellAuthToken(ctx, shell.MicrovmID, &microvmsapi.CreateMicrovmShellAuthTokenInput{ExpirationInMinutes: 5})
	if err != nil || out.AuthToken[microvmsapi.AuthTokenResponseKey] == "" {
		t.Fatalf("%+v %v", out, err)
	}
	_, err = c.CreateMicrovmShellAuthToken(ctx, shell.MicrovmID, &microvmsapi.CreateMicrovmShellAuthTokenInput{ExpirationInMinutes: 61})
	wantErr(t, err, microvmsapi.ValidationException, 400)
}

func TestSimulatedProxy(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	var mu sync.Mutex
	var seen []http.Header
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		io.WriteString(w, "hello "+r.Proto)
	})
	s := newServer(t, microvmstest.Options{Clock: clk.Now, App: app})
	c := newClient(t, s, microvms.WithClock(clk.Now))
	ctx := ctx(t)
	arn := s.AddImage("app")
	m := run(t, c, arn)
	other := run(t, c, arn)
	tok, err := c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := c.CreateMicrovmAuthToken(ctx, other.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	if err != nil {
		t.Fatal(err)
	}
	h1 := endpointClient(s, false)
	auth := func(tok, port string) map[string]string {
		h := map[string]string{}
		if tok != "" {
			h["x-aws-proxy-auth"] = tok
		}
		if port != "" {
			h["x-aws-proxy-port"] = port
		}
		return h
	}

	// PENDING: authorized but not running yet.
	resp, _ := get(t, h1, m.Endpoint, "/", auth(tok, "8080"))
	if resp.StatusCode != 502 {
		t.Fatalf("pending: %d", resp.StatusCode)
	}
	pollState(t, c, m.MicrovmID, microvmsapi.StateRunning)

	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"no port", auth(tok, ""), 400},
		{"port not a number", auth(tok, "80a"), 400},
		{"port 0", auth(tok, "0"), 400},
		{"port too big", auth(tok, "65536"), 400},
		{"no token", auth("", "8080"), 403},
		{"bad token", auth("nope", "8080"), 403},
		{"port not covered", auth(tok, "8081"), 403},
		{"other microVM's token", auth(otherTok, "8080"), 403},
		{"ok", auth(tok, "8080"), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, h1, m.Endpoint, "/x", tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %q, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status != 200 && (!isPlainRejection(resp) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")) {
				t.Fatalf("rejection headers %v", resp.Header)
			}
		})
	}
	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	for k := range last {
		if strings.HasPrefix(strings.ToLower(k), "x-aws-proxy-") {
			t.Fatalf("the app saw %s", k)
		}
	}
	if last.Get(microvmstest.MicrovmIDHeader) != m.MicrovmID {
		t.Fatalf("app headers %v", last)
	}

	// Ranges and allPorts cover their ports.
	rangeTok, err := c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5,
		AllowedPorts: []microvmsapi.AllowedPort{{Range: &microvmsapi.PortRange{StartPort: 3000, EndPort: 3001}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := raw(t, s, http.MethodPost, microvmsapi.AuthTokenPath(m.MicrovmID), []byte(`{"expirationInMinutes":5,"allowedPorts":[{"allPorts":{}}]}`), false)
	var all microvmsapi.CreateMicrovmAuthTokenOutput
	if err := json.Unmarshal(r.body, &all); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok, port string
		status    int
	}{
		{rangeTok, "3001", 200}, {rangeTok, "3002", 403}, {rangeTok, "8080", 403},
		{all.AuthToken[microvmsapi.AuthTokenResponseKey], "9000", 200}, {all.AuthToken[microvmsapi.AuthTokenResponseKey], "1", 200},
	} {
		if resp, _ := get(t, h1, m.Endpoint, "/", auth(tc.tok, tc.port)); resp.StatusCode != tc.status {
			t.Fatalf("port %s: %d, want %d", tc.port, resp.StatusCode, tc.status)
		}
	}

	// HTTP/2 with force-h2.
	h2 := endpointClient(s, true)
	hdr := auth(tok, "8080")
	hdr["x-aws-proxy-force-h2"] = "true"
	resp, body := get(t, h2, m.Endpoint, "/h2", hdr)
	if resp.StatusCode != 200 || body != "hello HTTP/2.0" {
		t.Fatalf("h2: %d %q", resp.StatusCode, body)
	}
	prs := s.ProxyRequests()
	lastPR := prs[len(prs)-1]
	if lastPR != (microvmstest.ProxyRequest{MicrovmID: m.MicrovmID, Port: 8080, Proto: "HTTP/2.0", Path: "/h2", Status: 200, ForceH2: true}) {
		t.Fatalf("proxy request %+v", lastPR)
	}
	if prs[1].Status != 400 || prs[1].Port != 0 || prs[1].Proto != "HTTP/1.1" {
		t.Fatalf("proxy request %+v", prs[1])
	}

	// Suspended: 502. Expired token: 403.
	if err := c.SuspendMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	pollState(t, c, m.MicrovmID, microvmsapi.StateSuspended)
	if resp, _ := get(t, h1, m.Endpoint, "/", auth(tok, "8080")); resp.StatusCode != 502 {
		t.Fatalf("suspended: %d", resp.StatusCode)
	}
	_ = c.ResumeMicrovm(ctx, m.MicrovmID)
	pollState(t, c, m.MicrovmID, microvmsapi.StateRunning)
	if resp, _ := get(t, h1, m.Endpoint, "/", auth(tok, "8080")); resp.StatusCode != 200 {
		t.Fatalf("resumed (the token survives): %d", resp.StatusCode)
	}
	clk.Advance(5*time.Minute + time.Second)
	if resp, _ := get(t, h1, m.Endpoint, "/", auth(tok, "8080")); resp.StatusCode != 403 {
		t.Fatalf("expired: %d", resp.StatusCode)
	}
}

func TestCertificate(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	block, _ := pem.Decode(s.CACertPEM())
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CA %v", err)
	}
	c := newClient(t, s)
	m := run(t, c, s.AddImage("app"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	cfg := s.TLSClientConfig()
	cfg.RootCAs = pool
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	resp, err := hc.Get("https://" + m.Endpoint + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || resp.StatusCode != 400 {
		t.Fatalf("TLS %+v status %d", resp.TLS, resp.StatusCode)
	}
	// Untrusted without the CA.
	if _, err := http.Get("https://" + m.Endpoint + "/"); err == nil {
		t.Fatal("the endpoint is trusted without the test CA")
	}
}

// ---- Forwarded mode ----

// tinyBackend speaks the microVM operations like localvm (unsigned,
// microvm-<uuid> ids, "<uuid>.microvms.localhost" endpoints) and serves
// the data plane of its microVMs on the same port, by Host.
type tinyBackend struct {
	*httptest.Server
	mu     sync.Mutex
	n      int
	vms    map[string]*microvmsapi.Microvm
	tokens map[string]string // token → id
	runs   []microvmsapi.RunMicrovmInput
	data   []http.Header // data-plane requests' headers
	hosts  []string
}

func newTinyBackend(t *testing.T) *tinyBackend {
	b := &tinyBackend{vms: map[string]*microvmsapi.Microvm{}, tokens: map[string]string{}}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

func (b *tinyBackend) fail(w http.ResponseWriter, exc string) {
	w.Header().Set(microvmsapi.ErrorTypeHeader, exc)
	w.WriteHeader(microvmsapi.StatusOf(exc))
	io.WriteString(w, `{"message":"x"}`)
}

func (b *tinyBackend) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if strings.HasSuffix(r.Host, ".microvms.localhost") {
		b.data = append(b.data, r.Header.Clone())
		b.hosts = append(b.hosts, r.Host)
		id := b.tokens[r.Header.Get("x-aws-proxy-auth")]
		if id == "" || b.vms[id].Endpoint != r.Host {
			w.WriteHeader(403)
			return
		}
		io.WriteString(w, "backend "+id+" "+r.URL.Path)
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == microvmsapi.PathMicrovms:
		var in microvmsapi.RunMicrovmInput
		_ = json.NewDecoder(r.Body).Decode(&in)
		b.runs = append(b.runs, in)
		b.n++
		u := "00000000-0000-4000-8000-" + strings.Repeat("0", 11) + strconv.Itoa(b.n)
		now := time.Now()
		m := &microvmsapi.Microvm{MicrovmID: "microvm-" + u, State: microvmsapi.StateRunning, Endpoint: u + ".microvms.localhost",
			ImageArn: in.ImageIdentifier, ImageVersion: "1.0", StartedAt: &now}
		b.vms[m.MicrovmID] = m
		json.NewEncoder(w).Encode(m)
	case r.Method == http.MethodGet && path == microvmsapi.PathMicrovms:
		out := microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{}}
		for _, m := range b.vms {
			out.Items = append(out.Items, microvmsapi.MicrovmSummary{MicrovmID: m.MicrovmID, State: m.State})
		}
		json.NewEncoder(w).Encode(out)
	case strings.HasPrefix(path, microvmsapi.PathMicrovms+"/"):
		rest := strings.TrimPrefix(path, microvmsapi.PathMicrovms+"/")
		id, action, _ := strings.Cut(rest, "/")
		m := b.vms[id]
		if m == nil {
			b.fail(w, microvmsapi.ResourceNotFoundException)
			return
		}
		switch {
		case action == "" && r.Method == http.MethodGet:
			json.NewEncoder(w).Encode(m)
		case action == "" && r.Method == http.MethodDelete:
			m.State = microvmsapi.StateTerminated
			io.WriteString(w, "{}")
		case action == "suspend":
			if m.State == microvmsapi.StateTerminated {
				b.fail(w, microvmsapi.ConflictException)
				return
			}
			m.State = microvmsapi.StateSuspended
			io.WriteString(w, "{}")
		case action == "resume":
			m.State = microvmsapi.StateRunning
			io.WriteString(w, "{}")
		case action == "auth-token":
			tok := "backend-token-" + strconv.Itoa(len(b.tokens)+1)
			b.tokens[tok] = id
			json.NewEncoder(w).Encode(microvmsapi.CreateMicrovmAuthTokenOutput{AuthToken: map[string]string{"X-aws-proxy-auth": tok}})
		default:
			w.WriteHeader(404)
		}
	default:
		w.WriteHeader(404)
	}
}

func TestForwarded(t *testing.T) {
	be := newTinyBackend(t)
	bc, err := microvms.New(be.URL, microvms.Unsigned(), microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, microvmstest.Options{Backend: bc, BackendEndpoint: be.URL})
	c := newClient(t, s)
	ctx := ctx(t)
	arn := s.AddImage("tmpl")

	m, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, RunHookPayload: "p",
		EgressNetworkConnectors: []string{s.ConnectorARN(microvmsapi.ConnectorInternet), "arn:aws:lambda:us-east-1:123456789012:network-connector:vpc1"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != microvmsapi.StatePending || !strings.HasPrefix(m.Endpoint, "127.0.0.1:") || m.ImageArn != arn || m.ImageVersion != "1" {
		t.Fatalf("run %+v", m)
	}
	be.mu.Lock()
	fin := be.runs[0]
	beVM := be.vms[m.MicrovmID]
	be.mu.Unlock()
	if beVM == nil {
		t.Fatalf("the backend's id was not reused: %s", m.MicrovmID)
	}
	if fin.ImageIdentifier != "tmpl" || fin.RunHookPayload != "p" || len(fin.EgressNetworkConnectors) != 1 {
		t.Fatalf("forwarded input %+v", fin)
	}
	g, err := c.GetMicrovm(ctx, m.MicrovmID)
	if err != nil || g.State != microvmsapi.StateRunning || g.Endpoint != m.Endpoint || g.ImageArn != arn {
		t.Fatalf("get %+v %v", g, err)
	}
	l, err := c.ListMicrovms(ctx, microvms.ListInput{})
	if err != nil || len(l.Items) != 1 || l.Items[0].State != microvmsapi.StateRunning {
		t.Fatalf("list %+v %v", l, err)
	}

	// The data plane.
	tok, err := c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	if err != nil {
		t.Fatal(err)
	}
	h1 := endpointClient(s, false)
	for _, tc := range []struct {
		headers map[string]string
		status  int
	}{
		{map[string]string{"x-aws-proxy-auth": tok}, 400},
		{map[string]string{"x-aws-proxy-auth": tok, "x-aws-proxy-port": "http"}, 400},
		{map[string]string{"x-aws-proxy-auth": "bogus", "x-aws-proxy-port": "8080"}, 403},
		{map[string]string{"x-aws-proxy-auth": tok, "x-aws-proxy-port": "8081"}, 403},
	} {
		if resp, _ := get(t, h1, m.Endpoint, "/", tc.headers); resp.StatusCode != tc.status || !isPlainRejection(resp) {
			t.Fatalf("%v: %d, want %d", tc.headers, resp.StatusCode, tc.status)
		}
	}
	be.mu.Lock()
	n := len(be.data)
	be.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d rejected requests reached the backend", n)
	}
	for i, h2 := range []bool{false, true, false} {
		hdr := map[string]string{"x-aws-proxy-auth": tok, "x-aws-proxy-port": "8080", "x-custom": "v"}
		if h2 {
			hdr["x-aws-proxy-force-h2"] = "true"
		}
		resp, body := get(t, endpointClient(s, h2), m.Endpoint, "/path", hdr)
		if resp.StatusCode != 200 || body != "backend "+m.MicrovmID+" /path" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	be.mu.Lock()
	data, hosts, ntok := be.data, be.hosts, len(be.tokens)
	be.mu.Unlock()
	if ntok != 1 {
		t.Fatalf("%d backend tokens minted, want 1 (cached)", ntok)
	}
	for i, h := range data {
		if hosts[i] != beVM.Endpoint || h.Get("x-aws-proxy-auth") != "backend-token-1" || h.Get("x-aws-proxy-port") != "8080" || h.Get("x-custom") != "v" {
			t.Fatalf("upstream request %d: host %s headers %v", i, hosts[i], h)
		}
	}
	if data[1].Get("x-aws-proxy-force-h2") != "true" || data[0].Get("x-aws-proxy-force-h2") != "" {
		t.Fatalf("force-h2 not passed on: %v / %v", data[0], data[1])
	}
	prs := s.ProxyRequests()
	if p := prs[len(prs)-2]; p.Proto != "HTTP/2.0" || !p.ForceH2 || p.Status != 200 || p.MicrovmID != m.MicrovmID {
		t.Fatalf("proxy request %+v", p)
	}

	// Suspend, resume, terminate are forwarded; backend errors keep their
	// exception.
	if err := c.SuspendMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.GetMicrovm(ctx, m.MicrovmID); g.State != microvmsapi.StateSuspended {
		t.Fatalf("suspended? %s", g.State)
	}
	if err := c.ResumeMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if err := c.TerminateMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.GetMicrovm(ctx, m.MicrovmID); g.State != microvmsapi.StateTerminated {
		t.Fatalf("terminated? %s", g.State)
	}
	wantErr(t, c.SuspendMicrovm(ctx, m.MicrovmID), microvmsapi.ConflictException, 409)
	_, err = c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
	wantErr(t, err, microvmsapi.ConflictException, 409)
	if resp, _ := get(t, h1, m.Endpoint, "/", map[string]string{"x-aws-proxy-auth": tok, "x-aws-proxy-port": "8080"}); resp.StatusCode != 502 {
		t.Fatalf("terminated endpoint: %d", resp.StatusCode)
	}
	_, err = c.GetMicrovm(ctx, "microvm-unknown")
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)

	// Validation happens before forwarding.
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: "tmpl"})
	wantErr(t, err, microvmsapi.ValidationException, 400)
	be.mu.Lock()
	runs := len(be.runs)
	be.mu.Unlock()
	if runs != 1 {
		t.Fatalf("%d runs reached the backend", runs)
	}
}

func TestNewOptions(t *testing.T) {
	bc, _ := microvms.New("http://127.0.0.1:1", microvms.Unsigned())
	if _, err := microvmstest.New(microvmstest.Options{Backend: bc}); err == nil {
		t.Fatal("Backend without BackendEndpoint accepted")
	}
	if _, err := microvmstest.New(microvmstest.Options{Backend: bc, BackendEndpoint: "ftp://x"}); err == nil {
		t.Fatal("bad BackendEndpoint accepted")
	}
	s := newServer(t, microvmstest.Options{Region: "eu-west-1", AccountID: "111111111111"})
	if s.ImageARN("a") != "arn:aws:lambda:eu-west-1:111111111111:microvm-image:a" {
		t.Fatal(s.ImageARN("a"))
	}
	c := newClient(t, s)
	if _, err := c.ListMicrovms(context.Background(), microvms.ListInput{}); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrent drives the fake from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	s := newServer(t, microvmstest.Options{Rates: map[microvms.Operation]float64{microvms.OpRunMicrovm: 0, microvms.OpTerminateMicrovm: 0}})
	c := newClient(t, s)
	arn := s.AddImage("app")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			m, err := c.RunMicrovm(context.Background(), &microvmsapi.RunMicrovmInput{ImageIdentifier: arn})
			if err != nil {
				t.Error(err)
				return
			}
			for range 3 {
				_, _ = c.GetMicrovm(context.Background(), m.MicrovmID)
				_, _ = c.ListMicrovms(context.Background(), microvms.ListInput{MaxResults: 2})
			}
			_ = c.TerminateMicrovm(context.Background(), m.MicrovmID)
			_ = s.Requests()
			_ = s.ProxyRequests()
		})
	}
	wg.Wait()
}
