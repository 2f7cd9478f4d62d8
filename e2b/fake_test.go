package e2b

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
	// failUntar makes the extraction into these sandboxes fail.
	failUntar map[string]bool
	killed    []string
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
	files    map[string]string // HomeDir's files, by relative path
	rules    []headerRule
	// tarOut, when set, is what TarHome sends instead of files (a
	// sandbox whose tar says what it likes).
	tarOut []byte
	// received holds the headers of every archive extracted into the box.
	received []tar.Header
}

func newFake(t *testing.T) *fakePlatform {
	f := &fakePlatform{boxes: map[string]*fakeBox{}, failUntar: map[string]bool{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
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
	b.files = map[string]string{}
	b.rules = spec.HeaderRules
	switch {
	case spec.Network != nil:
		p := *spec.Network
		b.policy = &p
	case spec.DenyInternet:
		p := rayito.DenyAllNetwork()
		b.policy = &p
	}
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

func (f *fakePlatform) kill(_ context.Context, id string) error {
	f.mu.Lock()
	f.killed = append(f.killed, id)
	f.mu.Unlock()
	return f.setState(id, "TERMINATED")
}
func (f *fakePlatform) pause(_ context.Context, id string) error {
	return f.setState(id, "SUSPENDED")
}
func (f *fakePlatform) resume(_ context.Context, id string) error {
	return f.setState(id, "RUNNING")
}

func (f *fakePlatform) setHeaderRules(_ context.Context, id string, rules []headerRule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.box(id)
	if err != nil {
		return err
	}
	b.rules = rules
	return nil
}

type fakeSandbox struct {
	f  *fakePlatform
	id string
}

// fakeLogs are every fake sandbox's daemon records, a second apart from
// the fake's clock.
func (f *fakePlatform) fakeLogs() []rayito.LogEntry {
	t := f.clock
	return []rayito.LogEntry{
		{Time: t, Level: "info", Message: "rayd started", Fields: map[string]string{"version": "v0"}},
		{Time: t.Add(time.Second), Level: "debug", Message: "hook", Fields: map[string]string{"hook": "run"}},
		{Time: t.Add(2 * time.Second), Level: "warn", Message: "network policy: install failed"},
		{Time: t.Add(3 * time.Second), Level: "error", Message: "kernel died"},
	}
}

func (s *fakeSandbox) Logs(_ context.Context, since time.Time, limit int) ([]rayito.LogEntry, error) {
	var out []rayito.LogEntry
	for _, e := range s.f.fakeLogs() {
		if !e.Time.Before(since) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
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
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	p := s.f.boxes[s.id].policy
	if p == nil {
		return &rayito.NetworkState{}, nil
	}
	return &rayito.NetworkState{AllowOut: p.AllowOut, DenyOut: p.DenyOut, EgressProxyConfigured: p.EgressProxy != nil}, nil
}

// TarHome writes the box's files as a tar archive, in pieces of at most
// 1000 bytes, as rayd sends output.
func (s *fakeSandbox) TarHome(_ context.Context, w io.Writer, _ bool) error {
	if err := s.running(); err != nil {
		return err
	}
	s.f.mu.Lock()
	files := maps.Clone(s.f.boxes[s.id].files)
	out := s.f.boxes[s.id].tarOut
	s.f.mu.Unlock()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if out != nil {
		files = nil
	} else if err := tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o750}); err != nil {
		// HomeDir itself first, as GNU tar sends it.
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(files[name]))}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	b := buf.Bytes()
	if out != nil {
		b = out
	}
	for len(b) > 0 {
		n := min(len(b), 1000)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (s *fakeSandbox) UntarHome(context.Context) (io.WriteCloser, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	u := &fakeUntar{pw: pw, done: make(chan error, 1)}
	fail := s.f.failUntar[s.id]
	go func() {
		got := map[string]string{}
		var hs []tar.Header
		tr := tar.NewReader(pr)
		var err error
		for {
			var h *tar.Header
			h, err = tr.Next()
			if err != nil {
				break
			}
			b, rerr := io.ReadAll(tr)
			if rerr != nil {
				err = rerr
				break
			}
			hs = append(hs, *h)
			if h.Typeflag == tar.TypeReg {
				got[strings.TrimPrefix(h.Name, "./")] = string(b)
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if fail {
			err = &httpError{500, "tar in the new sandbox ended with status exited, exit code 2"}
		}
		pr.CloseWithError(errors.Join(err, errors.New("tar ended")))
		if err == nil {
			s.f.mu.Lock()
			maps.Copy(s.f.boxes[s.id].files, got)
			s.f.boxes[s.id].received = append(s.f.boxes[s.id].received, hs...)
			s.f.mu.Unlock()
		}
		u.done <- err
	}()
	return u, nil
}

type fakeUntar struct {
	pw   *io.PipeWriter
	done chan error
}

func (u *fakeUntar) Write(p []byte) (int, error) { return u.pw.Write(p) }
func (u *fakeUntar) Close() error {
	u.pw.Close()
	return <-u.done
}

// writeFile puts a file into id's HomeDir.
func (f *fakePlatform) writeFile(id, name, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boxes[id].files[name] = content
}

// filesOf is id's HomeDir.
func (f *fakePlatform) filesOf(id string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.boxes[id].files)
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
