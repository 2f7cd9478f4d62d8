package localvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

func TestMain(m *testing.M) {
	MaybeRunInit() // wire_test.go launches real sandboxes from this binary
	if os.Getenv(asClientEnv) != "" {
		runAsClient() // TestOwnerOnly's other user
	}
	if os.Getenv(poolChildDirEnv) != "" {
		runPoolChild() // TestPrebootedKilledPlatformSwept's platform
	}
	os.Exit(registrytest.RunWithLeakCheck(m))
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeProxy answers endpoint requests with the microVM it found.
type fakeProxy struct {
	lookup func(string) (*registry.Target, bool)
	closed atomic.Int32
}

func (p *fakeProxy) Match(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	return strings.HasSuffix(strings.ToLower(host), registry.EndpointSuffix)
}

func (p *fakeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := p.lookup(r.Host)
	if !ok {
		http.Error(w, "unknown endpoint", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "proxied %s running=%v", t.MicrovmID(), t.Running())
}

func (p *fakeProxy) Close() { p.closed.Add(1) }

type fakes struct {
	l     *registrytest.Launcher
	hooks *registrytest.Hooks
	proxy *fakeProxy
}

func (f *fakes) deps(string) (deps, error) {
	return deps{
		launcher: f.l,
		minter:   &registrytest.Minter{},
		newProxy: func(lookup func(string) (*registry.Target, bool)) proxy {
			f.proxy.lookup = lookup
			return f.proxy
		},
	}, nil
}

func newFakeServer(t *testing.T, opts Options) (*Server, *fakes) {
	t.Helper()
	f := &fakes{hooks: registrytest.NewHooks(t), proxy: &fakeProxy{}}
	// Unprivileged, like the real launcher without root: no pool.
	f.l = &registrytest.Launcher{HooksAddr: f.hooks.Addr(), APIAddr: "127.0.0.1:1", NoPool: fmt.Errorf("%w: this platform runs rootless", launcher.ErrNoPool)}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	opts, err := normalize(opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := open(t.Context(), opts, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, f
}

// serve runs s.Serve on a loopback port; stop ends it and returns its error.
func serve(t *testing.T, s *Server) (base string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	var once atomic.Bool
	stop = func() error {
		if !once.CompareAndSwap(false, true) {
			return nil
		}
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + ln.Addr().String(), stop
}

func do(t *testing.T, c *http.Client, method, url, host, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func waitState(t *testing.T, base, id string, state microvmsapi.State) microvmsapi.Microvm {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := do(t, http.DefaultClient, "GET", base+microvmsapi.MicrovmPath(id), "", "")
		var m microvmsapi.Microvm
		_ = json.Unmarshal([]byte(body), &m)
		if m.State == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s, want %s", id, body, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{
		"127.0.0.1:7450": true, "localhost:7450": true, "[::1]:1": true, "127.1.2.3:0": true,
		":7450": false, "0.0.0.0:7450": false, "[::]:7450": false, "192.168.1.10:7450": false,
		"example.com:7450": false, "127.0.0.1": false,
	} {
		if err := checkAddr(addr, false); (err == nil) != ok {
			t.Errorf("checkAddr(%q) = %v", addr, err)
		}
	}
	if err := checkAddr("0.0.0.0:7450", true); err != nil {
		t.Errorf("AllowRemote: %v", err)
	}
	// New refuses before touching anything.
	dir := t.TempDir() + "/state"
	if _, err := New(t.Context(), Options{Addr: "0.0.0.0:7450", StateDir: dir}); err == nil || !strings.Contains(err.Error(), "AllowRemote") {
		t.Fatalf("New with a remote address: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("New created the state dir before refusing")
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	o, err := normalize(Options{StateDir: "rel"})
	if err != nil || o.Addr != DefaultAddr || !strings.HasPrefix(o.StateDir, "/") || o.Logger == nil {
		t.Fatalf("%+v %v", o, err)
	}
	if DefaultStateDir() != registry.DefaultStateDir() {
		t.Fatal("DefaultStateDir")
	}
	for _, n := range []int{-1, MaxPrebooted + 1} {
		if _, err := normalize(Options{Prebooted: n}); err == nil || !strings.Contains(err.Error(), "Prebooted must be between 0 and 16") {
			t.Fatalf("Prebooted %d: %v", n, err)
		}
	}
	if o, err := normalize(Options{Prebooted: MaxPrebooted}); err != nil || o.Prebooted != MaxPrebooted {
		t.Fatalf("Prebooted %d: %v", MaxPrebooted, err)
	}
}

// TestPrebootedNeedsRoot: a platform whose launcher cannot pre-boot
// (rootless, unisolated) keeps no pool and boots on request.
func TestPrebootedNeedsRoot(t *testing.T) {
	t.Parallel()
	s, f := newFakeServer(t, Options{Prebooted: 2})
	if ready, target := s.Prebooted(); ready != 0 || target != 0 {
		t.Fatalf("Prebooted = %d, %d", ready, target)
	}
	base, _ := serve(t, s)
	_, body := do(t, http.DefaultClient, "POST", base+microvmsapi.PathMicrovms, "", `{"imageIdentifier":"local"}`)
	var m microvmsapi.Microvm
	_ = json.Unmarshal([]byte(body), &m)
	waitState(t, base, m.MicrovmID, microvmsapi.StateRunning)
	if n := len(f.l.Launched()); n != 1 {
		t.Fatalf("%d launches", n)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	s, f := newFakeServer(t, Options{})
	base, stop := serve(t, s)

	// HTTP/1.1 to the API.
	res, body := do(t, http.DefaultClient, "POST", base+microvmsapi.PathMicrovms, "", `{"imageIdentifier":"local"}`)
	if res.StatusCode != 200 || res.ProtoMajor != 1 {
		t.Fatalf("Run: %d %s", res.StatusCode, body)
	}
	var m microvmsapi.Microvm
	_ = json.Unmarshal([]byte(body), &m)
	waitState(t, base, m.MicrovmID, microvmsapi.StateRunning)

	// The endpoint goes to the proxy, which finds the microVM.
	port := strings.TrimPrefix(base, "http://127.0.0.1")
	res, body = do(t, http.DefaultClient, "GET", base+"/anything", strings.ToUpper(m.Endpoint)+port, "")
	if res.StatusCode != 200 || body != "proxied "+m.MicrovmID+" running=true" {
		t.Fatalf("proxy: %d %s", res.StatusCode, body)
	}

	// h2c with prior knowledge.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer h2c.CloseIdleConnections()
	res, body = do(t, h2c, "GET", base+microvmsapi.PathMicrovms, "", "")
	if res.StatusCode != 200 || res.ProtoMajor != 2 || !strings.Contains(body, m.MicrovmID) {
		t.Fatalf("h2c list: %d %s %s", res.StatusCode, res.Proto, body)
	}

	// Headers well beyond 64 KiB are refused (net/http allows some slack).
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+microvmsapi.PathMicrovms, nil)
	req.Header.Set("X-Big", strings.Repeat("a", 128<<10))
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("big header: %d", res.StatusCode)
		}
	}

	// Shutdown is graceful and leaves the sandbox running.
	if err := stop(); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if n := f.l.Instance(m.MicrovmID).Terminated(); n != 0 {
		t.Fatal("Serve's end terminated a sandbox")
	}

	// TerminateAll ends it; Close is idempotent.
	if err := s.TerminateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.l.Instance(m.MicrovmID).Terminated() != 1 || f.hooks.Terminates() != 1 {
		t.Fatal("TerminateAll did not tear the sandbox down")
	}
	for range 2 {
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if f.proxy.closed.Load() != 1 {
		t.Fatal("proxy connections not released")
	}
}

func TestServeRefusesRemoteListener(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip("cannot listen on 0.0.0.0:", err)
	}
	defer ln.Close()
	s, _ := newFakeServer(t, Options{})
	if err := s.Serve(t.Context(), ln); err == nil || !strings.Contains(err.Error(), "AllowRemote") {
		t.Fatalf("Serve on 0.0.0.0: %v", err)
	}

	open, _ := newFakeServer(t, Options{AllowRemote: true, Addr: "0.0.0.0:0"})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- open.ListenAndServe(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("AllowRemote: %v", err)
	}
}

func TestPrivileged(t *testing.T) {
	t.Parallel()
	s, f := newFakeServer(t, Options{})
	if s.Privileged() {
		t.Fatal("privileged")
	}
	f.l.Priv = true
	if !s.Privileged() {
		t.Fatal("not privileged")
	}
}

func TestReopenKeepsSandboxes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1, f1 := newFakeServer(t, Options{StateDir: dir})
	base, stop := serve(t, s1)
	_, body := do(t, http.DefaultClient, "POST", base+microvmsapi.PathMicrovms, "", `{"imageIdentifier":"local"}`)
	var m microvmsapi.Microvm
	_ = json.Unmarshal([]byte(body), &m)
	waitState(t, base, m.MicrovmID, microvmsapi.StateRunning)
	_ = stop()
	// One Server per state directory.
	if _, err := open(t.Context(), s1.opts, f1.deps); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Server on one state dir: %v", err)
	}
	if err := s1.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f1.l.Instance(m.MicrovmID).Terminated() != 0 {
		t.Fatal("Close terminated a sandbox")
	}

	// The next server re-adopts it when its launcher finds it alive.
	f := &fakes{hooks: f1.hooks, proxy: &fakeProxy{}}
	f.l = &registrytest.Launcher{HooksAddr: f.hooks.Addr()}
	f.l.SetAlive(m.MicrovmID)
	opts, _ := normalize(Options{StateDir: dir, Logger: testLogger(t)})
	s2, err := open(t.Context(), opts, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	base2, _ := serve(t, s2)
	waitState(t, base2, m.MicrovmID, microvmsapi.StateRunning)
}

// TestQuotas checks the local platform's throttling: ten times the AWS
// quotas by default, the AWS quotas themselves with AWSQuotas.
func TestQuotas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		aws       bool
		throttled bool
	}{{false, false}, {true, true}} {
		s, _ := newFakeServer(t, Options{AWSQuotas: tc.aws})
		base, stop := serve(t, s)
		// TerminateMicrovm's AWS quota is 10/s with a burst of 10.
		got429 := false
		for range 15 {
			res, _ := do(t, http.DefaultClient, "DELETE", base+microvmsapi.PathMicrovms+"/microvm-nope", "", "")
			got429 = got429 || res.StatusCode == http.StatusTooManyRequests
		}
		if got429 != tc.throttled {
			t.Errorf("AWSQuotas=%v: throttled=%v, want %v", tc.aws, got429, tc.throttled)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}
