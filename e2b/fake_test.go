package e2b

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// fakePlatform stands in for Rayito: sandboxes are records, and every
// port of every sandbox is one httptest server that tells the test what
// reached it.
type fakePlatform struct {
	mu       sync.Mutex
	n        int
	boxes    map[string]*fakeBox
	specs    []createSpec
	upstream *httptest.Server
	clock    time.Time
}

type fakeBox struct {
	id       string
	token    string
	state    string
	template string
	md       map[string]string
	started  time.Time
	deadline time.Time
	policy   *rayito.NetworkPolicy
}

func newFake(t *testing.T) *fakePlatform {
	f := &fakePlatform{boxes: map[string]*fakeBox{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.upstream = httptest.NewServer(http.HandlerFunc(f.serveUpstream))
	t.Cleanup(f.upstream.Close)
	return f
}

// serveUpstream is every sandbox's every port: it echoes what the
// gateway forwarded, /stream sends a flushed chunk and holds the stream
// open, and /early answers (headers flushed) before it reads the request
// body, then echoes the body: what a streaming RPC does.
func (f *fakePlatform) serveUpstream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Seen-Port", r.Header.Get("X-Fake-Port"))
	w.Header().Set("X-Seen-Access-Token", r.Header.Get("X-Access-Token"))
	w.Header().Set("X-Seen-Traffic", r.Header.Get(headerTraffic))
	w.Header().Set("X-Seen-Sandbox-Id", r.Header.Get(headerSandboxID))
	w.Header().Set("X-Seen-Api-Key", r.Header.Get("X-API-KEY"))
	w.Header().Set("X-Seen-Path", r.URL.RequestURI())
	switch r.URL.Path {
	case "/health":
		w.WriteHeader(http.StatusNoContent)
	case "/stream":
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case "/early":
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = io.Copy(w, r.Body)
	default:
		fmt.Fprint(w, "ok")
	}
}

func (f *fakePlatform) box(id string) (*fakeBox, error) {
	b := f.boxes[id]
	if b == nil {
		return nil, fmt.Errorf("sandbox %s not found: %w", id, rayito.ErrNotFound)
	}
	return b, nil
}

func (f *fakePlatform) create(_ context.Context, spec createSpec) (sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.specs = append(f.specs, spec)
	id := fmt.Sprintf("sbx-%03d", f.n)
	tmpl := spec.Template
	if tmpl == "" {
		tmpl = "rayito-default"
	}
	b := &fakeBox{id: id, token: fmt.Sprintf("token-%03d-%s", f.n, "x"), state: "RUNNING", template: tmpl,
		md: maps.Clone(spec.Metadata), started: f.clock.Add(time.Duration(f.n) * time.Second)}
	b.deadline = time.Now().Add(spec.Timeout)
	f.boxes[id] = b
	return &fakeSandbox{f: f, id: id}, nil
}

func (f *fakePlatform) connect(_ context.Context, id string) (sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.box(id)
	if err != nil {
		return nil, err
	}
	if isEnded(b.state) {
		return nil, &rayito.SandboxEndedError{ID: id}
	}
	return &fakeSandbox{f: f, id: id}, nil
}

func (f *fakePlatform) getInfo(_ context.Context, id string) (*rayito.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.box(id)
	if err != nil {
		return nil, err
	}
	return &rayito.Info{ID: id, State: b.state, Template: b.template, StartedAt: b.started}, nil
}

func (f *fakePlatform) list(context.Context) ([]rayito.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rayito.Info
	for _, b := range f.boxes {
		if isEnded(b.state) {
			continue
		}
		out = append(out, rayito.Info{ID: b.id, State: b.state, Template: b.template, StartedAt: b.started})
	}
	return out, nil
}

func (f *fakePlatform) setState(id, st string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.box(id)
	if err != nil {
		return err
	}
	b.state = st
	return nil
}

func (f *fakePlatform) kill(_ context.Context, id string) error { return f.setState(id, "TERMINATED") }
func (f *fakePlatform) pause(_ context.Context, id string) error {
	return f.setState(id, "SUSPENDED")
}
func (f *fakePlatform) resume(_ context.Context, id string) error {
	return f.setState(id, "RUNNING")
}

type fakeSandbox struct {
	f  *fakePlatform
	id string
}

func (s *fakeSandbox) b() *fakeBox {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.boxes[s.id]
}

func (s *fakeSandbox) ID() string          { return s.id }
func (s *fakeSandbox) AccessToken() string { return s.b().token }

func (s *fakeSandbox) running() error {
	if st := s.b().state; st != "RUNNING" {
		return fmt.Errorf("sandbox %s is %s: %w", s.id, st, rayito.ErrSandboxEnded)
	}
	return nil
}

func (s *fakeSandbox) Info(context.Context) (*rayito.Info, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	b := s.f.boxes[s.id]
	return &rayito.Info{ID: s.id, State: b.state, Template: b.template, StartedAt: b.started, Metadata: maps.Clone(b.md),
		CPUCount: 2, MemoryLimit: 512 << 20, Lifecycle: &rayito.Lifecycle{Deadline: b.deadline}}, nil
}

func (s *fakeSandbox) SetTimeout(_ context.Context, d time.Duration, atLeast bool) (*rayito.Lifecycle, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	b := s.f.boxes[s.id]
	nd := time.Now().Add(d)
	if !atLeast || nd.After(b.deadline) {
		b.deadline = nd
	}
	return &rayito.Lifecycle{Deadline: b.deadline}, nil
}

func (s *fakeSandbox) MetricsHistory(_ context.Context, from, to time.Time) ([]rayito.Metrics, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	return []rayito.Metrics{{Time: time.Unix(1700000000, 0), CPUCount: 2, CPUPercent: 12.5, MemUsed: 100, MemTotal: 200, DiskUsed: 5, DiskTotal: 10}}, nil
}

func (s *fakeSandbox) Metrics(context.Context) (*rayito.Metrics, error) {
	return &rayito.Metrics{DiskTotal: 1 << 30}, nil
}

func (s *fakeSandbox) UpdateNetwork(_ context.Context, p rayito.NetworkPolicy) (*rayito.NetworkState, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.boxes[s.id].policy = &p
	return &rayito.NetworkState{AllowOut: p.AllowOut, DenyOut: p.DenyOut}, nil
}

func (s *fakeSandbox) Network(context.Context) (*rayito.NetworkState, error) {
	return &rayito.NetworkState{}, nil
}

func (s *fakeSandbox) Port(n int) (string, http.RoundTripper, error) {
	return s.f.upstream.URL, portTransport{n}, nil
}

// portTransport marks which port a request was for, as the SDK's
// transport adds the endpoint's headers.
type portTransport struct{ port int }

func (t portTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Fake-Port", fmt.Sprint(t.port))
	return http.DefaultTransport.RoundTrip(r)
}
