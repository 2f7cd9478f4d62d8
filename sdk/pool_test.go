package rayito

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// poolHealth is the daemon of the fake's simulated microVMs: ready, this
// SDK's version, the id the proxy names.
type poolHealth struct {
	raydv1connect.UnimplementedHealthServiceHandler
}

func (poolHealth) Health(_ context.Context, r *connect.Request[raydv1.HealthRequest]) (*connect.Response[raydv1.HealthResponse], error) {
	return connect.NewResponse(&raydv1.HealthResponse{AgentReady: true, AgentVersion: Version, SandboxId: r.Header().Get(microvmstest.MicrovmIDHeader)}), nil
}

// poolFake is the scripted AWS fake with simulated microVMs, and an
// observer that reads every microVM's state often (the fake moves a
// simulated microVM on GetMicrovm calls only; the SDK's ready wait reads
// the control plane every 5 s).
type poolFake struct {
	*microvmstest.Server
	image string
	mv    *microvms.Client
}

func newPoolFake(t *testing.T) *poolFake {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(raydv1connect.NewHealthServiceHandler(poolHealth{}))
	off := map[microvms.Operation]float64{}
	for _, op := range []microvms.Operation{microvms.OpRunMicrovm, microvms.OpGetMicrovm, microvms.OpListMicrovms, microvms.OpTerminateMicrovm,
		microvms.OpSuspendMicrovm, microvms.OpResumeMicrovm, microvms.OpCreateMicrovmAuthToken} {
		off[op] = -1
	}
	srv, err := microvmstest.New(microvmstest.Options{App: mux, Polls: 1, Rates: off})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	mv, err := srv.Client(microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	f := &poolFake{Server: srv, image: srv.AddImage("pool-image"), mv: mv}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if out, err := mv.ListMicrovms(ctx, microvms.ListInput{}); err == nil {
				for _, it := range out.Items {
					_, _ = mv.GetMicrovm(ctx, it.MicrovmID)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

func (f *poolFake) opts(t *testing.T, more ...Option) []Option {
	base := f.URL()
	cfg := aws.Config{Region: f.Region(), BaseEndpoint: &base,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return f.Credentials(), nil })}
	return append([]Option{WithBackend(BackendAWS), WithAWSConfig(cfg), WithEndpointRootCAs(f.CertPool()),
		WithTokenStoreDir(filepath.Join(t.TempDir(), "tokens")), WithTemplate(f.image), withTimings(fastTimings)}, more...)
}

// calls counts the control-plane calls of op the fake answered with 2xx.
func (f *poolFake) calls(op microvms.Operation) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Op == op && r.Status < 300 {
			n++
		}
	}
	return n
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// takeAll takes n sandboxes at once (the pool cannot refill in between).
func takeAll(t *testing.T, p *SandboxPool, n int) []*Sandbox {
	t.Helper()
	out := make([]*Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = p.Take(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A pool of 3 on the aws backend fills with Run and Suspend, hands out
// with Resume (a fourth Take at once falls back to Run), refills, and
// Close terminates the ready slots but not the taken ones. Records never
// hold the sandboxes' envs.
func TestPoolAWSWireCalls(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	store := NewPoolFileStore(filepath.Join(t.TempDir(), "pool", "slots.json"))
	p, err := NewPool(t.Context(), PoolConfig{Size: 3, FillConcurrency: 2, Store: store,
		Create: f.opts(t, WithEnvs(map[string]string{"POOL_ENV": "env-value-never-stored"}), WithMetadata(map[string]string{"team": "metadata-never-stored"}))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	waitFor(t, "3 ready slots", func() bool { return p.Stats().Ready == 3 })
	if r, s := f.calls(microvms.OpRunMicrovm), f.calls(microvms.OpSuspendMicrovm); r != 3 || s != 3 {
		t.Fatalf("filling made %d runs and %d suspends, want 3 and 3", r, s)
	}
	recs, err := store.Load(t.Context())
	if err != nil || len(recs) != 3 {
		t.Fatalf("store: %d records, %v", len(recs), err)
	}
	fileBytes := readStoreFile(t, store)
	if strings.Contains(fileBytes, "env-value-never-stored") || strings.Contains(fileBytes, "metadata-never-stored") || strings.Contains(fileBytes, "POOL_ENV") {
		t.Fatal("the pool's records hold the sandboxes' envs or metadata")
	}
	slotIDs := map[string]bool{}
	for _, r := range recs {
		slotIDs[r.ID] = true
		if r.Filling || r.ExpiresAt.Sub(r.CreatedAt) != DefaultPoolLifetime {
			t.Errorf("record %v: filling %v, lifetime %s", r, r.Filling, r.ExpiresAt.Sub(r.CreatedAt))
		}
	}

	got := takeAll(t, p, 4)
	st := p.Stats()
	if st.Hits != 3 || st.Fallbacks != 1 || st.Taken != 4 {
		t.Fatalf("stats after 4 takes: %+v", st)
	}
	if n := f.calls(microvms.OpResumeMicrovm); n != 3 {
		t.Fatalf("%d resumes, want 3", n)
	}
	taken := map[string]bool{}
	for _, s := range got {
		taken[s.ID()] = true
		info, err := s.Info(t.Context())
		if err != nil || info.State != "RUNNING" {
			t.Fatalf("taken %s: %+v %v", s.ID(), info, err)
		}
	}
	for id := range slotIDs {
		if !taken[id] {
			t.Errorf("slot %s was not handed out", id)
		}
	}
	waitFor(t, "the refill", func() bool { return p.Stats().Ready == 3 })
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	terminated := map[string]bool{}
	for _, r := range f.Requests() {
		if r.Op == microvms.OpTerminateMicrovm {
			terminated[r.Path[strings.LastIndex(r.Path, "/")+1:]] = true
		}
	}
	if len(terminated) != 3 {
		t.Errorf("Close terminated %d sandboxes, want the 3 ready ones", len(terminated))
	}
	for id := range taken {
		if terminated[id] {
			t.Errorf("Close terminated the taken sandbox %s", id)
		}
	}
	if recs, _ := store.Load(t.Context()); len(recs) != 0 {
		t.Errorf("after Close the store holds %d records", len(recs))
	}
	if st := p.Stats(); st.Ready != 0 || st.Filling != 0 {
		t.Errorf("after Close: %+v", st)
	}
	if _, err := p.Take(t.Context()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Take after Close = %v", err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	for _, s := range got {
		_ = s.Kill(context.Background())
	}
}

func readStoreFile(t *testing.T, s PoolStore) string {
	t.Helper()
	b, err := os.ReadFile(s.(*poolFileStore).path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A slot killed behind the pool's back is swept and never handed out;
// Take skips one that ended between sweeps.
func TestPoolSweepsEndedSlots(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	p, err := NewPool(t.Context(), PoolConfig{Size: 2, SweepInterval: 20 * time.Millisecond, Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	waitFor(t, "2 ready slots", func() bool { return p.Stats().Ready == 2 })
	p.mu.Lock()
	victim := p.ready[0].ID
	p.mu.Unlock()
	if err := f.mv.TerminateMicrovm(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sweep", func() bool { return p.Stats().Swept >= 1 })
	waitFor(t, "the refill", func() bool { return p.Stats().Ready == 2 })
	for _, s := range takeAll(t, p, 2) {
		if s.ID() == victim {
			t.Fatal("the killed slot was handed out")
		}
		_ = s.Kill(context.Background())
	}
	if st := p.Stats(); st.Hits != 2 {
		t.Errorf("stats: %+v", st)
	}

	// Ended between sweeps: Take kills it, counts it and goes on.
	p.mu.Lock()
	p.cfg.SweepInterval = time.Hour
	p.mu.Unlock()
	waitFor(t, "the refill", func() bool { return p.Stats().Ready == 2 })
	p.mu.Lock()
	victim = p.ready[0].ID
	p.mu.Unlock()
	if err := f.mv.TerminateMicrovm(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the end", func() bool {
		vm, err := f.mv.GetMicrovm(t.Context(), victim)
		return err == nil && ended(vm.State)
	})
	s, err := p.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill(context.Background())
	if s.ID() == victim {
		t.Fatal("an ended slot was handed out")
	}
}

// A platform that refuses to pause (a local platform without root)
// makes the pool keep its slots running; Take still hands them out.
func TestPoolKeepsSlotsRunningWithoutPause(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	f.Fail(microvms.OpSuspendMicrovm, 1000, http.StatusBadRequest, "ValidationException", "")
	p, err := NewPool(t.Context(), PoolConfig{Size: 2, FillConcurrency: 1, Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	waitFor(t, "2 ready slots", func() bool { return p.Stats().Ready == 2 })
	st := p.Stats()
	if !st.KeepsRunning || st.FillFailures != 0 {
		t.Fatalf("stats: %+v", st)
	}
	s, err := p.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill(context.Background())
	if n := f.calls(microvms.OpResumeMicrovm); n != 0 {
		t.Errorf("%d resumes of running slots", n)
	}
}

// WithWait waits for a slot instead of creating one; ctx bounds it, and
// Close ends it with ErrPoolClosed.
func TestPoolTakeWait(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	f.Fail(microvms.OpRunMicrovm, 1000, http.StatusBadRequest, "ValidationException", "")
	p, err := NewPool(t.Context(), PoolConfig{Size: 1, Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Take(ctx, WithWait()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take(WithWait) with nothing ready = %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Take(t.Context(), WithWait()); done <- err }()
	time.Sleep(20 * time.Millisecond)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("a waiting Take at Close = %v", err)
	}
	if st := p.Stats(); st.FillFailures < 1 || st.Filling != 0 {
		t.Errorf("stats: %+v", st)
	}
	if _, err := p.Take(t.Context()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Take after Close = %v", err)
	}
}

// A pool made over the store of one that did not close adopts its ready
// slots (no new Run for them) and kills the ones it was still filling.
func TestPoolAdoptsStoredSlots(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	path := filepath.Join(t.TempDir(), "slots.json")
	p1, err := NewPool(t.Context(), PoolConfig{Size: 2, Store: NewPoolFileStore(path), Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 ready slots", func() bool { return p1.Stats().Ready == 2 })
	// The process "ends": the pool stops without Close.
	p1.mu.Lock()
	p1.closed = true
	p1.mu.Unlock()
	p1.cancel()
	p1.wg.Wait()
	recs, err := NewPoolFileStore(path).Load(t.Context())
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	// One more record, of a slot still filling.
	extra, err := Create(t.Context(), f.opts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	extra.dp.close()
	recs = append(recs, PoolSlot{ID: extra.ID(), AccessToken: extra.AccessToken(), CreatedAt: time.Now(), Filling: true})
	if err := NewPoolFileStore(path).Save(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	runs := f.calls(microvms.OpRunMicrovm)
	p2, err := NewPool(t.Context(), PoolConfig{Size: 2, Store: NewPoolFileStore(path), Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close(context.Background())
	if st := p2.Stats(); st.Ready != 2 {
		t.Fatalf("adopted: %+v", st)
	}
	vm, err := f.mv.GetMicrovm(t.Context(), extra.ID())
	if err != nil || !ended(vm.State) && vm.State != "TERMINATING" {
		t.Fatalf("the filling slot's sandbox: %+v %v", vm, err)
	}
	for _, s := range takeAll(t, p2, 2) {
		if s.ID() != recs[0].ID && s.ID() != recs[1].ID {
			t.Errorf("took %s, not an adopted slot", s.ID())
		}
		_ = s.Kill(context.Background())
	}
	if st := p2.Stats(); st.Hits != 2 {
		t.Errorf("stats: %+v", st)
	}
	if n := f.calls(microvms.OpRunMicrovm) - runs; n > 2 {
		t.Errorf("%d runs after adoption, want only the refill's", n)
	}
}

// Bad configurations and Take options are refused before any call.
func TestPoolRefusesBadConfig(t *testing.T) {
	t.Parallel()
	base := []Option{WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1"), WithoutTokenStore()}
	for name, pc := range map[string]PoolConfig{
		"size 0":            {Size: 0, Create: base},
		"size 65":           {Size: 65, Create: base},
		"negative interval": {Size: 1, SweepInterval: -time.Second, Create: base},
		"negative fill":     {Size: 1, FillConcurrency: -1, Create: base},
		"min remaining":     {Size: 1, Create: append(base, WithTimeout(10*time.Minute))},
		"bad lifetime":      {Size: 1, Create: append(base, WithMaxLifetime(9*time.Hour))},
	} {
		if _, err := NewPool(t.Context(), pc); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: NewPool = %v", name, err)
		}
	}
	p, err := NewPool(t.Context(), PoolConfig{Size: 1, Create: base, FillConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	for _, o := range []Option{WithEnvs(map[string]string{"A": "b"}), WithTemplate("x"), WithAccessToken("t"), WithTimeout(time.Minute)} {
		if _, err := p.Take(t.Context(), o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Take with a sandbox option = %v", err)
		}
	}
	if _, _, err := takeOptions([]TakeOption{WithWait(), withTestGateway(), nil}); err != nil {
		t.Errorf("an extension's option (sdk/secrets') refused: %v", err)
	}
}

// The file store: a round trip, mode 0600 in a 0700 directory, atomic
// replacement; a file open to others, a symlink or a corrupt file is
// refused.
func TestPoolFileStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sub")
	path := filepath.Join(dir, "slots.json")
	s := NewPoolFileStore(path)
	if recs, err := s.Load(t.Context()); err != nil || len(recs) != 0 {
		t.Fatalf("missing file: %v %v", recs, err)
	}
	tok, _ := accesstoken.New()
	now := time.Now().UTC().Truncate(time.Second)
	want := []PoolSlot{{ID: "microvm-0123456789abcdef", AccessToken: tok, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}}
	if err := s.Save(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(t.Context())
	if err != nil || len(got) != 1 || got[0].ID != want[0].ID || got[0].AccessToken != tok || !got[0].ExpiresAt.Equal(want[0].ExpiresAt) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	if strings.Contains(got[0].String(), tok) || strings.Contains(strings.ReplaceAll(strings.ReplaceAll(got[0].GoString(), " ", ""), "\n", ""), tok) {
		t.Error("a slot prints its token")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %d entries", len(entries))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(t.Context()); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("a 0644 file: %v", err)
	}
	if err := s.Save(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("Save kept mode %v", st.Mode().Perm())
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPoolFileStore(link).Load(t.Context()); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("a symlink: %v", err)
	}
	for name, body := range map[string]string{
		"not json":      "nope",
		"version":       `{"version":2,"slots":[]}`,
		"unknown field": `{"version":1,"slots":[],"envs":{"A":"b"}}`,
		"bad id":        `{"version":1,"slots":[{"id":"../x","access_token":"` + tok + `"}]}`,
		"bad token":     `{"version":1,"slots":[{"id":"microvm-0123456789abcdef","access_token":"short"}]}`,
		"twice":         `{"version":1,"slots":[{"id":"microvm-0123456789abcdef","access_token":"` + tok + `"},{"id":"microvm-0123456789abcdef","access_token":"` + tok + `"}]}`,
		"trailing":      `{"version":1,"slots":[]} {}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewPoolFileStore(p).Load(t.Context())
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error shows the token", name)
		}
	}
}

// FuzzDecodePoolFile: any bytes decode to valid records or a typed error,
// never a panic.
func FuzzDecodePoolFile(f *testing.F) {
	tok := strings.Repeat("A", 43)
	f.Add([]byte(`{"version":1,"slots":[]}`))
	f.Add([]byte(`{"version":1,"slots":[{"id":"microvm-0123456789abcdef","access_token":"` + tok + `","created_at":"2026-01-01T00:00:00Z","filling":true}]}`))
	f.Add([]byte(`{"version":1,"slots":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodePoolFile(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, r := range recs {
			if _, err := accesstoken.Decode(r.AccessToken); err != nil {
				t.Fatalf("a malformed token passed")
			}
		}
	})
}

// Warmup runs on every new sandbox before its pause; a failing one kills
// the sandbox and counts as a fill failure.
func TestPoolWarmup(t *testing.T) {
	t.Parallel()
	f := newPoolFake(t)
	var mu sync.Mutex
	var seen []string
	warmup := func(ctx context.Context, sbx *Sandbox) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, sbx.ID())
		if len(seen) == 1 {
			return errors.New("warmup failed")
		}
		return nil
	}
	p, err := NewPool(t.Context(), PoolConfig{Size: 1, FillConcurrency: 1, Warmup: warmup, Create: f.opts(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	waitFor(t, "a ready slot", func() bool { return p.Stats().Ready == 1 })
	if st := p.Stats(); st.FillFailures != 1 {
		t.Fatalf("stats: %+v", st)
	}
	mu.Lock()
	first := seen[0]
	mu.Unlock()
	waitFor(t, "the failed slot's end", func() bool {
		vm, err := f.mv.GetMicrovm(t.Context(), first)
		return err == nil && ended(vm.State)
	})
	if n := f.calls(microvms.OpSuspendMicrovm); n != 1 {
		t.Errorf("%d suspends, want 1 (the warmed sandbox's)", n)
	}
}
