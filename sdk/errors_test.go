package rayito

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// platform is an in-process local platform with one sandbox (fakeID) whose
// daemon answers Health, ProcessService (scripted per test) and the /files
// endpoint, plus ids that are unknown or ended.
type platform struct {
	srv     *httptest.Server
	health  *fakeSandbox
	proc    *fakeProcess
	pty     *fakePty
	fs      *fakeFS
	life    *fakeLifecycle
	files   http.HandlerFunc
	app     http.HandlerFunc // /app: a server of the sandbox's own (Port)
	endedAt time.Time
	killed  atomic.Int32

	// vm is fakeID's state as GetMicrovm reports it (RUNNING by
	// default); onGet, when set, runs on each GetMicrovm and may change
	// it. suspend and resume answer those calls (default: 200 and a state
	// change to SUSPENDED or RUNNING).
	vmMu     sync.Mutex
	vm       microvmsapi.Microvm
	onGet    func(vm *microvmsapi.Microvm)
	gets     atomic.Int32
	suspends atomic.Int32
	resumes  atomic.Int32
	suspend  func(vm *microvmsapi.Microvm) error
	resume   func(vm *microvmsapi.Microvm) error
	// runs are the RunMicrovm bodies received.
	runs []microvmsapi.RunMicrovmInput
}

// setVM changes fakeID's state.
func (p *platform) setVM(f func(vm *microvmsapi.Microvm)) {
	p.vmMu.Lock()
	defer p.vmMu.Unlock()
	f(&p.vm)
}

func (p *platform) state() microvmsapi.State {
	p.vmMu.Lock()
	defer p.vmMu.Unlock()
	return p.vm.State
}

const endedID = "microvm-ended"

func newPlatform(t *testing.T) *platform {
	t.Helper()
	p := &platform{health: &fakeSandbox{agentVersion: Version}, proc: &fakeProcess{}, pty: &fakePty{}, fs: &fakeFS{}, life: &fakeLifecycle{}}
	p.endedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p.vm = microvmsapi.Microvm{MicrovmID: fakeID, State: microvmsapi.StateRunning, Endpoint: "x.microvms.localhost"}
	writeVM := func(w http.ResponseWriter, vm *microvmsapi.Microvm) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(vm)
	}
	notFound := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"no such microvm"}`))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+microvmsapi.PathMicrovms, func(w http.ResponseWriter, r *http.Request) {
		var in microvmsapi.RunMicrovmInput
		_ = json.NewDecoder(r.Body).Decode(&in)
		p.vmMu.Lock()
		p.runs = append(p.runs, in)
		p.vmMu.Unlock()
		writeVM(w, &microvmsapi.Microvm{MicrovmID: fakeID, State: microvmsapi.StateRunning, Endpoint: "x.microvms.localhost"})
	})
	mux.HandleFunc("GET "+microvmsapi.PathMicrovms, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{
			{MicrovmID: fakeID, State: p.state()},
			{MicrovmID: endedID, State: microvmsapi.StateTerminated},
		}})
	})
	mux.HandleFunc("GET "+microvmsapi.PathMicrovms+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case fakeID:
			p.gets.Add(1)
			p.vmMu.Lock()
			if p.onGet != nil {
				p.onGet(&p.vm)
			}
			vm := p.vm
			p.vmMu.Unlock()
			writeVM(w, &vm)
		case endedID:
			writeVM(w, &microvmsapi.Microvm{MicrovmID: endedID, State: microvmsapi.StateTerminated, StateReason: "timeout reached", TerminatedAt: &p.endedAt})
		default:
			notFound(w)
		}
	})
	mux.HandleFunc("DELETE "+microvmsapi.PathMicrovms+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != fakeID {
			notFound(w)
			return
		}
		p.killed.Add(1)
	})
	mux.HandleFunc("POST "+microvmsapi.AuthTokenPath(fakeID), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&microvmsapi.CreateMicrovmAuthTokenOutput{AuthToken: map[string]string{microvmsapi.AuthTokenResponseKey: "jwe"}})
	})
	transition := func(count *atomic.Int32, hook *func(*microvmsapi.Microvm) error, to microvmsapi.State) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			count.Add(1)
			p.vmMu.Lock()
			var err error
			if *hook != nil {
				err = (*hook)(&p.vm)
			} else {
				p.vm.State = to
			}
			p.vmMu.Unlock()
			if err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Amzn-ErrorType", err.Error())
				w.WriteHeader(microvmsapi.StatusOf(err.Error()))
				_, _ = w.Write([]byte(`{"__type":"` + err.Error() + `","message":"no"}`))
			}
		}
	}
	mux.HandleFunc("POST "+microvmsapi.SuspendPath(fakeID), transition(&p.suspends, &p.suspend, microvmsapi.StateSuspended))
	mux.HandleFunc("POST "+microvmsapi.ResumePath(fakeID), transition(&p.resumes, &p.resume, microvmsapi.StateRunning))
	mux.Handle(raydv1connect.NewHealthServiceHandler(fakeHealth{f: p.health}))
	mux.Handle(raydv1connect.NewProcessServiceHandler(p.proc))
	mux.Handle(raydv1connect.NewPtyServiceHandler(p.pty))
	mux.Handle(raydv1connect.NewFilesystemServiceHandler(p.fs))
	mux.Handle(raydv1connect.NewLifecycleServiceHandler(p.life))
	mux.HandleFunc("/files", func(w http.ResponseWriter, r *http.Request) {
		if p.files != nil {
			p.files(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc("/app", func(w http.ResponseWriter, r *http.Request) {
		if p.app != nil {
			p.app(w, r)
			return
		}
		http.NotFound(w, r)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *platform) opts(t *testing.T, more ...Option) []Option {
	return append([]Option{WithBackend(BackendLocal), WithEndpoint(p.srv.URL), WithTokenStoreDir(filepath.Join(t.TempDir(), "tokens")),
		withTimings(fastTimings)}, more...)
}

// fastTimings are the SDK's waits shrunk for tests.
var fastTimings = timings{
	statePoll: time.Millisecond, statePollMax: 5 * time.Millisecond,
	healthPoll: time.Millisecond, healthPollMax: 4 * time.Millisecond,
	reconnect: 300 * time.Millisecond, suspendGrace: 200 * time.Millisecond,
	transition: time.Millisecond, transitionMax: 2 * time.Millisecond,
}

// fakePty scripts PtyService: create answers Create, connect each
// Connect (reattach) call.
type fakePty struct {
	raydv1connect.UnimplementedPtyServiceHandler
	mu       sync.Mutex
	create   func(*connect.ServerStream[raydv1.PtyServerMessage]) error
	connect  func(from uint64, s *connect.ServerStream[raydv1.PtyServerMessage]) error
	connects []uint64
}

func (f *fakePty) Create(_ context.Context, _ *connect.Request[raydv1.PtyStart], s *connect.ServerStream[raydv1.PtyServerMessage]) error {
	return f.create(s)
}

func (f *fakePty) Connect(_ context.Context, r *connect.Request[raydv1.ConnectRequest], s *connect.ServerStream[raydv1.PtyServerMessage]) error {
	f.mu.Lock()
	f.connects = append(f.connects, r.Msg.GetFromSeq())
	f.mu.Unlock()
	return f.connect(r.Msg.GetFromSeq(), s)
}

// fakeFS scripts FilesystemService.WatchDir: watch answers the n-th call
// (from 1).
type fakeFS struct {
	raydv1connect.UnimplementedFilesystemServiceHandler
	calls atomic.Int32
	watch func(ctx context.Context, n int, s *connect.ServerStream[raydv1.WatchDirResponse]) error
}

func (f *fakeFS) WatchDir(ctx context.Context, _ *connect.Request[raydv1.WatchDirRequest], s *connect.ServerStream[raydv1.WatchDirResponse]) error {
	return f.watch(ctx, int(f.calls.Add(1)), s)
}

// fakeLifecycle scripts LifecycleService.SetTimeout.
type fakeLifecycle struct {
	raydv1connect.UnimplementedLifecycleServiceHandler
	mu   sync.Mutex
	last *raydv1.SetTimeoutRequest
	set  func(*raydv1.SetTimeoutRequest) (*raydv1.LifecycleState, error)
}

func (f *fakeLifecycle) SetTimeout(_ context.Context, r *connect.Request[raydv1.SetTimeoutRequest]) (*connect.Response[raydv1.SetTimeoutResponse], error) {
	f.mu.Lock()
	f.last = r.Msg
	f.mu.Unlock()
	st, err := f.set(r.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&raydv1.SetTimeoutResponse{State: st}), nil
}

// fakeProcess scripts ProcessService: start answers the Start stream,
// connect each Connect (reattach) call.
type fakeProcess struct {
	raydv1connect.UnimplementedProcessServiceHandler
	mu       sync.Mutex
	start    func(*connect.ServerStream[raydv1.ProcessEvent]) error
	connect  func(from uint64, s *connect.ServerStream[raydv1.ProcessEvent]) error
	list     func() error
	connects []uint64
}

func (f *fakeProcess) Start(_ context.Context, _ *connect.Request[raydv1.StartRequest], s *connect.ServerStream[raydv1.ProcessEvent]) error {
	return f.start(s)
}

func (f *fakeProcess) Connect(_ context.Context, r *connect.Request[raydv1.ConnectRequest], s *connect.ServerStream[raydv1.ProcessEvent]) error {
	f.mu.Lock()
	f.connects = append(f.connects, r.Msg.GetFromSeq())
	f.mu.Unlock()
	return f.connect(r.Msg.GetFromSeq(), s)
}

func (f *fakeProcess) List(context.Context, *connect.Request[raydv1.ListRequest]) (*connect.Response[raydv1.ListResponse], error) {
	return nil, f.list()
}

// wireErr is an error as rayd sends it: code, fixed message, ErrorInfo.
func wireErr(code connect.Code, reason raydv1.ErrorReason, msg string) error {
	ce := connect.NewError(code, errors.New(msg))
	d, _ := connect.NewErrorDetail(&raydv1.ErrorInfo{Reason: reason})
	ce.AddDetail(d)
	return ce
}

// An error from rayd keeps its reason end to end: errors.Is with the
// sentinel, ReasonOf, and the SDK's own Code.
func TestRPCErrorsCarryTheReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code   connect.Code
		reason raydv1.ErrorReason
		is     error
		want   Reason
	}{
		{connect.CodeResourceExhausted, raydv1.ErrorReason_ERROR_REASON_DISK_FULL, ErrDiskFull, ReasonDiskFull},
		{connect.CodeResourceExhausted, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, ErrResourceExhausted, ReasonResourceExhausted},
		{connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED, ErrPermissionDenied, ReasonPolicyDenied},
		{connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_EXECUTABLE_NOT_FOUND, ErrExecutableNotFound, ReasonExecutableNotFound},
		{connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_NOT_EXECUTABLE, ErrNotExecutable, ReasonNotExecutable},
		{connect.CodeUnauthenticated, raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, ErrUnauthenticated, ReasonUnauthenticated},
		// An older rayd without ErrorInfo: the code decides.
		{connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED, ErrNotFound, ReasonNotFound},
	}
	p := newPlatform(t)
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		p.proc.list = func() error { return wireErr(c.code, c.reason, "fixed message") }
		_, err := sbx.Commands.List(t.Context())
		var re *RPCError
		if !errors.As(err, &re) || !errors.Is(err, c.is) || ReasonOf(err) != c.want || re.Code != codeOf(c.code) {
			t.Errorf("%v/%v: err %v (reason %q), want Is %v and reason %q", c.code, c.reason, err, ReasonOf(err), c.is, c.want)
		}
		if strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "ERROR_REASON") {
			t.Errorf("message shows internals: %q", err)
		}
	}
}

// The file endpoint's JSON error body carries the reason too.
func TestFileEndpointErrorsCarryTheReason(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.files = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":"resource_exhausted","message":"disk reserve reached","reason":"ERROR_REASON_DISK_RESERVE"}`))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sbx.Files.Write(t.Context(), "/tmp/x", []byte("data"))
	if !errors.Is(err, ErrDiskFull) || ReasonOf(err) != ReasonDiskReserve {
		t.Fatalf("Write = %v (reason %q)", err, ReasonOf(err))
	}
}

// Sandbox-level errors read as sentences about the sandbox, never as an
// AWS exception, an option name or a Go type.
func TestSandboxErrors(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	tok := WithAccessToken(testToken(t))
	clean := func(t *testing.T, err error) {
		t.Helper()
		for _, bad := range []string{"Exception", "microvms:", "With", "aws.Config", "404", "*"} {
			if strings.Contains(err.Error(), bad) {
				t.Errorf("%q shows %q", err, bad)
			}
		}
	}
	_, err := Connect(t.Context(), "microvm-nope", p.opts(t, tok)...)
	if !errors.Is(err, ErrNotFound) || err.Error() != "sandbox microvm-nope not found" || ReasonOf(err) != ReasonNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatal("the *APIError is no longer reachable")
	}
	clean(t, err)
	if err := Kill(t.Context(), "microvm-nope", p.opts(t)...); !errors.Is(err, ErrNotFound) || err.Error() != "sandbox microvm-nope not found" {
		t.Fatalf("Kill unknown: %v", err)
	}
	_, err = Connect(t.Context(), endedID, p.opts(t, tok)...)
	var ee *SandboxEndedError
	if !errors.Is(err, ErrSandboxEnded) || !errors.As(err, &ee) || ee.ID != endedID || !ee.EndedAt.Equal(p.endedAt) || ee.Reason != EndUnknown || ee.Detail != "timeout reached" {
		t.Fatalf("ended: %v", err)
	}
	if want := "sandbox microvm-ended ended at 2026-01-02T03:04:05Z (timeout reached)"; err.Error() != want || ReasonOf(err) != ReasonSandboxEnded {
		t.Fatalf("ended: %q, want %q", err, want)
	}
	_, err = Create(t.Context(), WithBackend(BackendAWS), withGetenv(func(string) string { return "" }))
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("aws without template: %v", err)
	}
	clean(t, err)
	_, err = Create(t.Context(), WithBackend(BackendAWS), WithTemplate("arn:aws:x"), WithAWSConfig(emptyAWSConfig()))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "region") {
		t.Fatalf("no region: %v", err)
	}
	clean(t, err)
	_, err = Connect(t.Context(), "../../etc/passwd", p.opts(t)...)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("path-like id: %v", err)
	}
}

// Nothing listening at the local endpoint: a sentence that says what to do.
func TestPlatformUnavailable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := Create(t.Context(), WithBackend(BackendLocal), WithEndpoint(url), WithoutTokenStore())
	if !errors.Is(err, ErrPlatformUnavailable) || ReasonOf(err) != ReasonPlatformUnavailable {
		t.Fatalf("Create = %v", err)
	}
	if want := "no local platform at " + url + "; start one with `rayito local up`"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if _, err := List(t.Context(), WithBackend(BackendLocal), WithEndpoint(url)); !errors.Is(err, ErrPlatformUnavailable) {
		t.Fatalf("List = %v", err)
	}
}

// Create stores the token, Connect from "another process" (no token in
// hand) finds it, Kill removes it; WithAccessToken overrides the store and
// WithoutTokenStore keeps it out.
func TestTokenStore(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	dir := filepath.Join(t.TempDir(), "tokens")
	opts := []Option{WithBackend(BackendLocal), WithEndpoint(p.srv.URL), WithTokenStoreDir(dir)}
	sbx, err := Create(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, fakeID))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stored token: %v %v", st, err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", st.Mode())
	}
	other, err := Connect(t.Context(), fakeID, opts...)
	if err != nil || other.AccessToken() != sbx.AccessToken() {
		t.Fatalf("Connect from the store: %v", err)
	}
	forced, err := Connect(t.Context(), fakeID, append(opts, WithAccessToken(testToken(t)))...)
	if err != nil || forced.AccessToken() == sbx.AccessToken() {
		t.Fatalf("WithAccessToken did not override: %v", err)
	}
	if err := Kill(t.Context(), fakeID, opts...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fakeID)); !os.IsNotExist(err) {
		t.Fatalf("Kill left the token: %v", err)
	}
	_, err = Connect(t.Context(), fakeID, opts...)
	if !errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), "With") {
		t.Fatalf("Connect without a stored token: %v", err)
	}
	if _, err := Create(t.Context(), append(opts, WithoutTokenStore())...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fakeID)); !os.IsNotExist(err) {
		t.Fatalf("WithoutTokenStore stored a token: %v", err)
	}
}
