package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/peercred"
)

// fakeLifecycle records what the hooks drive.
type fakeLifecycle struct {
	outcome  Outcome       // what Run returns; installed when empty
	runDelay time.Duration // widens races in Run

	mu         sync.Mutex
	runs       [][2]string
	terminates int
	termCtxDL  time.Duration // Terminate's deadline, measured at its start

	termGate chan struct{} // when set, Terminate waits for it
	termDone chan struct{} // closed when Terminate returns

	suspends, resumes, validates int
	streams                      int           // what Suspend returns
	suspendGate                  chan struct{} // when set, Suspend waits for it
	validateGate                 chan struct{} // when set, Validate waits for it
	validateErr                  error
}

func newFake() *fakeLifecycle { return &fakeLifecycle{termDone: make(chan struct{})} }

func (f *fakeLifecycle) Run(ctx context.Context, microvmID, payload string) Outcome {
	if f.runDelay > 0 {
		time.Sleep(f.runDelay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, [2]string{microvmID, payload})
	if f.outcome == "" {
		return OutcomeInstalled
	}
	return f.outcome
}

func (f *fakeLifecycle) Terminate(ctx context.Context) {
	dl, _ := ctx.Deadline()
	f.mu.Lock()
	f.terminates++
	f.termCtxDL = time.Until(dl)
	f.mu.Unlock()
	if f.termGate != nil {
		<-f.termGate
	}
	close(f.termDone)
}

func (f *fakeLifecycle) Suspend(ctx context.Context) int {
	f.mu.Lock()
	f.suspends++
	gate, n := f.suspendGate, f.streams
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return n
}

func (f *fakeLifecycle) Resume(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes++
}

func (f *fakeLifecycle) Validate(ctx context.Context) error {
	f.mu.Lock()
	f.validates++
	gate, err := f.validateGate, f.validateErr
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return err
}

// counts returns how often Suspend, Resume and Validate were called.
func (f *fakeLifecycle) counts() (suspends, resumes, validates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.suspends, f.resumes, f.validates
}

func (f *fakeLifecycle) runCalls() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]string(nil), f.runs...)
}

func (f *fakeLifecycle) terminateCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terminates
}

// Client source addresses (all of 127/8 is loopback) and what the fake peer
// lookup says about them.
const (
	fromPlatform  = "127.0.0.2" // uid 0
	fromSandbox   = "127.0.0.3" // uid 1000
	fromNotFound  = "127.0.0.4" // ErrNotFound, with a loopback remote
	fromOwnerGone = "127.0.0.5" // ErrOwnerGone
	fromError     = "127.0.0.6" // some other error
	fromSystem    = "127.0.0.7" // uid 999
)

type fakeOwners struct{ calls atomic.Int64 }

func (f *fakeOwners) lookup(local, remote net.Addr) (peercred.Owner, error) {
	f.calls.Add(1)
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return peercred.Owner{}, err
	}
	switch ap.Addr().Unmap().String() {
	case fromPlatform:
		return peercred.Owner{UID: 0, Inode: 1, State: peercred.StateEstablished}, nil
	case fromSandbox:
		return peercred.Owner{UID: 1000, Inode: 2, State: peercred.StateEstablished}, nil
	case fromSystem:
		return peercred.Owner{UID: 999, Inode: 3, State: peercred.StateEstablished}, nil
	case fromNotFound:
		return peercred.Owner{}, peercred.ErrNotFound
	case fromOwnerGone:
		return peercred.Owner{}, peercred.ErrOwnerGone
	default:
		return peercred.Owner{}, errors.New("lookup exploded")
	}
}

// startServer runs s.Serve on 127.0.0.1:0 for the rest of the test.
func startServer(t *testing.T, opts Options) (base string, s *Server, owners *fakeOwners) {
	t.Helper()
	owners = &fakeOwners{}
	if opts.PeerOwner == nil {
		opts.PeerOwner = owners.lookup
	}
	s = New(opts)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
	})
	return "http://" + ln.Addr().String(), s, owners
}

func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
	}
}

// call posts body to hook from the given source address.
func call(t *testing.T, base, from, hook, body string) reply {
	t.Helper()
	resp, err := clientFrom(from).Post(base+PathPrefix+hook, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s from %s: %v", hook, from, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s from %s: status %d: %s", hook, from, resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	if r.Hook != hook {
		t.Errorf("reply hook = %q, want %q", r.Hook, hook)
	}
	return r
}

func env(id, payload string) string {
	b, _ := json.Marshal(map[string]string{"microvmId": id, "runHookPayload": payload})
	return string(b)
}

func want(t *testing.T, got reply, out Outcome, phase Phase) {
	t.Helper()
	if got.Outcome != out || got.Phase != phase {
		t.Errorf("got outcome %q phase %q, want %q %q", got.Outcome, got.Phase, out, phase)
	}
}

func lastAudit(t *testing.T, s *Server) AuditEntry {
	t.Helper()
	a := s.Audit()
	if len(a) == 0 {
		t.Fatal("audit is empty")
	}
	return a[len(a)-1]
}

func TestRunInstallsOnceThenAlreadyRan(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})

	want(t, call(t, base, fromPlatform, HookRun, env("vm-1", "opaque")), OutcomeInstalled, PhaseRunning)
	if got := f.runCalls(); len(got) != 1 || got[0] != [2]string{"vm-1", "opaque"} {
		t.Fatalf("Lifecycle.Run calls = %q", got)
	}
	if s.Anomalies() != 0 {
		t.Errorf("anomalies = %d after the boot run", s.Anomalies())
	}
	if e := lastAudit(t, s); e.Hook != HookRun || e.Caller != CallerPlatform || e.UID != 0 || e.Outcome != OutcomeInstalled || e.Anomaly {
		t.Errorf("audit = %+v", e)
	}

	want(t, call(t, base, fromPlatform, HookRun, env("vm-2", "other")), OutcomeAlreadyRan, PhaseRunning)
	if len(f.runCalls()) != 1 {
		t.Errorf("Lifecycle.Run called again")
	}
	if s.Anomalies() != 1 {
		t.Errorf("anomalies = %d, want 1", s.Anomalies())
	}
	if e := lastAudit(t, s); e.Outcome != OutcomeAlreadyRan || !e.Anomaly {
		t.Errorf("audit = %+v", e)
	}
}

func TestRunTokenlessFromLifecycle(t *testing.T) {
	f := newFake()
	f.outcome = OutcomeTokenless
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "garbage")), OutcomeTokenless, PhaseRunning)
	if len(f.runCalls()) != 1 || s.Anomalies() != 0 {
		t.Errorf("runs=%d anomalies=%d", len(f.runCalls()), s.Anomalies())
	}
}

func TestRunFromSandboxIsIllegal(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})

	want(t, call(t, base, fromSandbox, HookRun, env("evil", "forged")), OutcomeIllegal, PhaseBooting)
	if len(f.runCalls()) != 0 {
		t.Fatalf("Lifecycle.Run called for a sandbox /run")
	}
	if s.Anomalies() != 1 {
		t.Errorf("anomalies = %d, want 1", s.Anomalies())
	}
	if e := lastAudit(t, s); e.Caller != CallerSandbox || e.UID != 1000 || e.Outcome != OutcomeIllegal || !e.Anomaly {
		t.Errorf("audit = %+v", e)
	}

	// The boot /run is still available to the platform.
	want(t, call(t, base, fromPlatform, HookRun, env("vm-1", "real")), OutcomeInstalled, PhaseRunning)
	if got := f.runCalls(); len(got) != 1 || got[0][1] != "real" {
		t.Errorf("Lifecycle.Run calls = %q", got)
	}
}

// Sandbox code may not call /run, /terminate, /validate or /ready: each
// answers illegal and does nothing. Its /suspend and /resume are acted
// upon (before /run there is nothing to suspend). Every call is an anomaly.
func TestSandboxOrigin(t *testing.T) {
	f := newFake()
	f.streams = 2
	base, s, _ := startServer(t, Options{Lifecycle: f, OnTerminated: func() { t.Error("OnTerminated called") }})
	for _, h := range []string{HookReady, HookValidate, HookRun, HookTerminate} {
		want(t, call(t, base, fromSandbox, h, env("x", "y")), OutcomeIllegal, PhaseBooting)
	}
	want(t, call(t, base, fromSandbox, HookSuspend, ""), OutcomeUnchanged, PhaseBooting)
	want(t, call(t, base, fromSandbox, HookResume, ""), OutcomeUnchanged, PhaseBooting)
	time.Sleep(100 * time.Millisecond) // give a wrongly started Terminate a chance to show
	if sus, res, val := f.counts(); f.terminateCalls() != 0 || len(f.runCalls()) != 0 || sus+res+val != 0 {
		t.Fatalf("sandbox calls reached the lifecycle: terminates=%d runs=%d suspends=%d resumes=%d validates=%d", f.terminateCalls(), len(f.runCalls()), sus, res, val)
	}
	if s.Anomalies() != 6 {
		t.Errorf("anomalies = %d, want 6", s.Anomalies())
	}
	// /ready from the sandbox did not use up the platform's first /ready.
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeChanged, PhaseReady)
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)

	// After /run, a forged /suspend and /resume are accepted, as anomalies.
	r := call(t, base, fromSandbox, HookSuspend, "")
	want(t, r, OutcomeChanged, PhaseSuspending)
	if r.StreamsClosed == nil || *r.StreamsClosed != 2 || r.SuspendGeneration != 1 {
		t.Errorf("forged /suspend reply %+v", r)
	}
	if e := lastAudit(t, s); e.Caller != CallerSandbox || e.Outcome != OutcomeChanged || !e.Anomaly {
		t.Errorf("audit = %+v", e)
	}
	r = call(t, base, fromSandbox, HookResume, "")
	want(t, r, OutcomeChanged, PhaseResumed)
	if r.ResumeGeneration != 1 {
		t.Errorf("forged /resume reply %+v", r)
	}
	if sus, res, _ := f.counts(); sus != 1 || res != 1 {
		t.Errorf("suspends %d resumes %d", sus, res)
	}
	// ... and /ready, /validate are still illegal from it.
	want(t, call(t, base, fromSandbox, HookReady, ""), OutcomeIllegal, PhaseResumed)
	want(t, call(t, base, fromSandbox, HookValidate, ""), OutcomeIllegal, PhaseResumed)
	if s.Anomalies() != 10 {
		t.Errorf("anomalies = %d, want 10", s.Anomalies())
	}
}

func TestTerminateFromSandboxIsIllegal(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	want(t, call(t, base, fromSandbox, HookTerminate, ""), OutcomeIllegal, PhaseRunning)
	time.Sleep(100 * time.Millisecond)
	if f.terminateCalls() != 0 {
		t.Fatal("Lifecycle.Terminate called for a sandbox /terminate")
	}
	if s.Anomalies() != 1 {
		t.Errorf("anomalies = %d", s.Anomalies())
	}
	// The platform can still terminate.
	want(t, call(t, base, fromPlatform, HookTerminate, ""), OutcomeTerminating, PhaseTerminating)
}

func TestUnknownCallers(t *testing.T) {
	for _, from := range []string{fromNotFound, fromOwnerGone, fromError} {
		t.Run(from, func(t *testing.T) {
			f := newFake()
			base, s, _ := startServer(t, Options{Lifecycle: f})
			// /run and /terminate fail closed.
			want(t, call(t, base, from, HookRun, env("vm", "forged")), OutcomeIllegal, PhaseBooting)
			want(t, call(t, base, from, HookTerminate, ""), OutcomeIllegal, PhaseBooting)
			// The others are answered, as anomalies.
			want(t, call(t, base, from, HookReady, ""), OutcomeChanged, PhaseReady)
			want(t, call(t, base, from, HookValidate, ""), OutcomeValidated, PhaseReady)
			time.Sleep(50 * time.Millisecond)
			if len(f.runCalls()) != 0 || f.terminateCalls() != 0 {
				t.Fatalf("unknown caller reached the lifecycle")
			}
			if s.Anomalies() != 4 {
				t.Errorf("anomalies = %d, want 4", s.Anomalies())
			}
			for _, e := range s.Audit() {
				if e.Caller != CallerUnknown || e.UID != -1 || !e.Anomaly {
					t.Errorf("audit = %+v", e)
				}
			}
			want(t, call(t, base, fromPlatform, HookRun, env("vm", "real")), OutcomeInstalled, PhaseRunning)
		})
	}
}

func TestSystemUIDIsPlatform(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromSystem, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	if e := lastAudit(t, s); e.Caller != CallerPlatform || e.UID != 999 {
		t.Errorf("audit = %+v", e)
	}
}

func TestBadEnvelopeConsumesBootRun(t *testing.T) {
	for name, body := range map[string]string{
		"empty":             "",
		"not json":          "microvmId=vm&runHookPayload=x",
		"null":              "null",
		"array":             `["vm","p"]`,
		"missing payload":   `{"microvmId":"vm"}`,
		"missing id":        `{"runHookPayload":"p"}`,
		"number id":         `{"microvmId":7,"runHookPayload":"p"}`,
		"null payload":      `{"microvmId":"vm","runHookPayload":null}`,
		"trailing garbage":  env("vm", "p") + "{}",
		"two objects":       env("vm", "p") + env("vm", "q"),
		"over 64 KiB":       env("vm", strings.Repeat("A", MaxBodyBytes)),
		"truncated":         env("vm", "p")[:10],
		"object in payload": `{"microvmId":"vm","runHookPayload":{"a":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			base, s, _ := startServer(t, Options{Lifecycle: f})
			want(t, call(t, base, fromPlatform, HookRun, body), OutcomeTokenless, PhaseRunning)
			if len(f.runCalls()) != 0 {
				t.Fatalf("Lifecycle.Run called with an ill-formed envelope")
			}
			if e := lastAudit(t, s); e.Outcome != OutcomeTokenless || !e.Anomaly || e.Caller != CallerPlatform {
				t.Errorf("audit = %+v", e)
			}
			want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeAlreadyRan, PhaseRunning)
			if len(f.runCalls()) != 0 {
				t.Fatalf("the boot /run was not consumed")
			}
		})
	}
}

func TestEnvelopeExtraFieldsAndEmptyStrings(t *testing.T) {
	f := newFake()
	base, _, _ := startServer(t, Options{Lifecycle: f})
	body := `{"microvmId":"","runHookPayload":"","future":{"x":[1,2]}}`
	want(t, call(t, base, fromPlatform, HookRun, body), OutcomeInstalled, PhaseRunning)
	if got := f.runCalls(); len(got) != 1 || got[0] != [2]string{"", ""} {
		t.Errorf("runs = %q", got)
	}
}

func TestTerminate(t *testing.T) {
	f := newFake()
	f.termGate = make(chan struct{})
	var terminated atomic.Int32
	done := make(chan struct{})
	base, s, _ := startServer(t, Options{Lifecycle: f, OnTerminated: func() {
		if terminated.Add(1) == 1 {
			close(done)
		}
	}})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)

	// The reply arrives while Lifecycle.Terminate is still blocked.
	want(t, call(t, base, fromPlatform, HookTerminate, ""), OutcomeTerminating, PhaseTerminating)
	if terminated.Load() != 0 {
		t.Fatal("OnTerminated ran before Terminate returned")
	}
	want(t, call(t, base, fromPlatform, HookTerminate, ""), OutcomeUnchanged, PhaseTerminating)
	for _, h := range []string{HookReady, HookValidate, HookSuspend, HookResume} {
		want(t, call(t, base, fromPlatform, h, ""), OutcomeTerminating, PhaseTerminating)
	}
	close(f.termGate)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("OnTerminated not called")
	}
	time.Sleep(50 * time.Millisecond)
	if n := terminated.Load(); n != 1 {
		t.Errorf("OnTerminated called %d times", n)
	}
	if n := f.terminateCalls(); n != 1 {
		t.Errorf("Terminate called %d times", n)
	}
	f.mu.Lock()
	dl := f.termCtxDL
	f.mu.Unlock()
	if dl <= TerminateTimeout-2*time.Second || dl > TerminateTimeout {
		t.Errorf("Terminate's deadline was %v away, want about %v", dl, TerminateTimeout)
	}
	if s.Anomalies() != 0 {
		t.Errorf("anomalies = %d", s.Anomalies())
	}
}

func TestRunAfterTerminate(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookTerminate, ""), OutcomeTerminating, PhaseTerminating)
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeTerminating, PhaseTerminating)
	if len(f.runCalls()) != 0 || s.Anomalies() != 1 {
		t.Errorf("runs=%d anomalies=%d", len(f.runCalls()), s.Anomalies())
	}
}

func TestReadyAndValidateBeforeRun(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookValidate, ""), OutcomeValidated, PhaseBooting)
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeChanged, PhaseReady)
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeUnchanged, PhaseReady)
	want(t, call(t, base, fromPlatform, HookValidate, ""), OutcomeValidated, PhaseReady)
	if _, _, v := f.counts(); v != 2 {
		t.Errorf("validates %d", v)
	}
	f.mu.Lock()
	f.validateErr = errors.New("self-check failed")
	f.mu.Unlock()
	want(t, call(t, base, fromPlatform, HookValidate, ""), OutcomeValidateFailed, PhaseReady)
	// Before /run there is nothing to suspend or resume: out of order.
	want(t, call(t, base, fromPlatform, HookSuspend, ""), OutcomeUnchanged, PhaseReady)
	want(t, call(t, base, fromPlatform, HookResume, ""), OutcomeUnchanged, PhaseReady)
	if sus, res, _ := f.counts(); sus+res != 0 {
		t.Errorf("suspends %d resumes %d", sus, res)
	}
	if s.Anomalies() != 2 {
		t.Errorf("anomalies = %d, want 2 (the out-of-order suspend and resume)", s.Anomalies())
	}
}

func TestReplyFormat(t *testing.T) {
	f := newFake()
	base, _, _ := startServer(t, Options{Lifecycle: f})
	resp, err := clientFrom(fromPlatform).Post(base+PathPrefix+"run", "application/json", strings.NewReader(env("vm", "p")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if got, want := string(raw), `{"hook":"run","outcome":"installed","phase":"running","suspend_generation":0,"resume_generation":0}`+"\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if resp.ProtoMajor != 1 || resp.ProtoMinor != 1 {
		t.Errorf("protocol %s", resp.Proto)
	}
}

func TestMethodsAndPaths(t *testing.T) {
	s := New(Options{Lifecycle: newFake()})
	h := s.Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		hook         string
	}{
		{http.MethodGet, PathPrefix + "run", http.StatusMethodNotAllowed, "run"},
		{http.MethodPut, PathPrefix + "terminate", http.StatusMethodNotAllowed, "terminate"},
		{http.MethodHead, PathPrefix + "ready", http.StatusMethodNotAllowed, "ready"},
		{http.MethodPost, PathPrefix + "nope", http.StatusNotFound, ""},
		{http.MethodPost, PathPrefix + "run/", http.StatusNotFound, ""},
		{http.MethodPost, PathPrefix + "Run", http.StatusNotFound, ""},
		{http.MethodPost, PathPrefix, http.StatusNotFound, ""},
		{http.MethodPost, "/aws/lambda-microvms/runtime/v2/run", http.StatusNotFound, ""},
		{http.MethodPost, PathPrefix + "x/../run", http.StatusNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(env("vm", "p"))))
		if rec.Code != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, rec.Code, tc.status)
		}
		if tc.status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != http.MethodPost {
			t.Errorf("%s %s: Allow = %q", tc.method, tc.path, rec.Header().Get("Allow"))
		}
		var r reply
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Outcome != OutcomeIllegal || r.Hook != tc.hook {
			t.Errorf("%s %s: reply %q (%v)", tc.method, tc.path, rec.Body.String(), err)
		}
		if e := lastAudit(t, s); e.Outcome != OutcomeIllegal || e.Hook != tc.hook || !e.Anomaly {
			t.Errorf("%s %s: audit = %+v", tc.method, tc.path, e)
		}
	}
	if s.Phase() != PhaseBooting {
		t.Errorf("phase = %s", s.Phase())
	}
}

func TestAuditRingBounded(t *testing.T) {
	s := New(Options{Lifecycle: newFake()})
	h := s.Handler()
	names := []string{HookValidate, HookSuspend, HookResume, HookReady}
	const calls = 200
	for i := range calls {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathPrefix+names[i%len(names)], nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("call %d: status %d", i, rec.Code)
		}
	}
	a := s.Audit()
	if len(a) != DefaultAuditSize {
		t.Fatalf("audit has %d entries, want %d", len(a), DefaultAuditSize)
	}
	for i, e := range a {
		if want := names[(calls-DefaultAuditSize+i)%len(names)]; e.Hook != want {
			t.Fatalf("entry %d: hook %q, want %q (oldest first)", i, e.Hook, want)
		}
		if i > 0 && e.Time.Before(a[i-1].Time) {
			t.Fatalf("entry %d is older than entry %d", i, i-1)
		}
		// No local address in a recorded request: the caller is unknown.
		if e.Caller != CallerUnknown || e.UID != -1 {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if s.Anomalies() != calls {
		t.Errorf("anomalies = %d, want %d", s.Anomalies(), calls)
	}
	// The copy is the caller's.
	a[0].Hook = "mutated"
	if s.Audit()[0].Hook == "mutated" {
		t.Error("Audit returned the ring itself")
	}
}

func TestAuditSmallRing(t *testing.T) {
	s := New(Options{Lifecycle: newFake(), AuditSize: 3})
	if len(s.Audit()) != 0 {
		t.Fatal("fresh audit not empty")
	}
	for i := range 2 {
		s.record(fmt.Sprint(i), peer{CallerPlatform, 0, "uid"}, OutcomeUnchanged, false)
	}
	if a := s.Audit(); len(a) != 2 || a[0].Hook != "0" || a[1].Hook != "1" {
		t.Fatalf("audit = %+v", a)
	}
	for i := 2; i < 7; i++ {
		s.record(fmt.Sprint(i), peer{CallerPlatform, 0, "uid"}, OutcomeUnchanged, false)
	}
	if a := s.Audit(); len(a) != 3 || a[0].Hook != "4" || a[2].Hook != "6" {
		t.Fatalf("audit = %+v", a)
	}
}

func TestConcurrentRunsInstallOnce(t *testing.T) {
	f := newFake()
	f.runDelay = 20 * time.Millisecond
	base, s, _ := startServer(t, Options{Lifecycle: f})
	const n = 24
	var wg sync.WaitGroup
	outcomes := make(chan Outcome, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := clientFrom(fromPlatform).Post(base+PathPrefix+HookRun, "application/json", strings.NewReader(env("vm", fmt.Sprint(i))))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var r reply
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
				t.Error(err)
				return
			}
			outcomes <- r.Outcome
		})
	}
	close(start)
	wg.Wait()
	close(outcomes)
	count := map[Outcome]int{}
	for o := range outcomes {
		count[o]++
	}
	if count[OutcomeInstalled] != 1 || count[OutcomeAlreadyRan] != n-1 {
		t.Errorf("outcomes = %v, want 1 installed and %d already_ran", count, n-1)
	}
	if got := len(f.runCalls()); got != 1 {
		t.Errorf("Lifecycle.Run called %d times", got)
	}
	if s.Anomalies() != n-1 {
		t.Errorf("anomalies = %d, want %d", s.Anomalies(), n-1)
	}
}

func TestIdentify(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("10.0.0.2"), Port: 9001}
	for _, tc := range []struct {
		name     string
		remote   string
		err      error
		uid      uint32
		addrs    []string
		addrsErr error
		want     Caller
		wantUID  int64
	}{
		{"root", "127.0.0.1:4000", nil, 0, nil, nil, CallerPlatform, 0},
		{"uid 999", "127.0.0.1:4000", nil, 999, nil, nil, CallerPlatform, 999},
		{"uid 1000", "127.0.0.1:4000", nil, 1000, nil, nil, CallerSandbox, 1000},
		{"overflow uid", "127.0.0.1:4000", nil, 65534, nil, nil, CallerSandbox, 65534},
		{"not found, from the host", "192.0.2.7:4000", peercred.ErrNotFound, 0, []string{"10.0.0.2", "fe80::1"}, nil, CallerPlatform, -1},
		{"not found, IPv6 host", "[2001:db8::9]:4000", peercred.ErrNotFound, 0, []string{"10.0.0.2"}, nil, CallerPlatform, -1},
		{"not found, loopback", "127.0.0.1:4000", peercred.ErrNotFound, 0, nil, nil, CallerUnknown, -1},
		{"not found, loopback 127/8", "127.9.9.9:4000", peercred.ErrNotFound, 0, nil, nil, CallerUnknown, -1},
		{"not found, mapped loopback", "[::ffff:127.0.0.1]:4000", peercred.ErrNotFound, 0, nil, nil, CallerUnknown, -1},
		{"not found, IPv6 loopback", "[::1]:4000", peercred.ErrNotFound, 0, nil, nil, CallerUnknown, -1},
		{"not found, our own address", "10.0.0.2:4000", peercred.ErrNotFound, 0, []string{"10.0.0.2"}, nil, CallerUnknown, -1},
		{"not found, another local address", "10.0.1.5:4000", peercred.ErrNotFound, 0, []string{"10.0.0.2", "10.0.1.5"}, nil, CallerUnknown, -1},
		{"not found, mapped local address", "[::ffff:10.0.1.5]:4000", peercred.ErrNotFound, 0, []string{"10.0.1.5"}, nil, CallerUnknown, -1},
		{"not found, addresses unknown", "192.0.2.7:4000", peercred.ErrNotFound, 0, nil, errors.New("netlink"), CallerUnknown, -1},
		{"owner gone", "192.0.2.7:4000", peercred.ErrOwnerGone, 0, nil, nil, CallerUnknown, -1},
		{"wrapped owner gone", "127.0.0.1:4000", fmt.Errorf("x: %w", peercred.ErrOwnerGone), 0, nil, nil, CallerUnknown, -1},
		{"other error", "192.0.2.7:4000", errors.New("no /proc"), 0, nil, nil, CallerUnknown, -1},
		{"unsupported", "192.0.2.7:4000", peercred.ErrUnsupported, 0, nil, nil, CallerUnknown, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Lifecycle: newFake(), PeerOwner: func(net.Addr, net.Addr) (peercred.Owner, error) {
				return peercred.Owner{UID: tc.uid, Inode: 1}, tc.err
			}})
			s.localAddrs = func() ([]netip.Addr, error) {
				var out []netip.Addr
				for _, a := range tc.addrs {
					out = append(out, netip.MustParseAddr(a))
				}
				return out, tc.addrsErr
			}
			remote := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tc.remote))
			p := s.identify(local, remote)
			if p.caller != tc.want || p.uid != tc.wantUID {
				t.Errorf("got %+v, want %s uid %d", p, tc.want, tc.wantUID)
			}
		})
	}
	s := New(Options{Lifecycle: newFake()})
	if p := s.identify(nil, local); p.caller != CallerUnknown {
		t.Errorf("nil local: %+v", p)
	}
}

// TestHandlerInAnotherServer covers the per-request identification used when
// Handler is served without Serve's ConnContext.
func TestHandlerInAnotherServer(t *testing.T) {
	f := newFake()
	owners := &fakeOwners{}
	s := New(Options{Lifecycle: f, PeerOwner: owners.lookup})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	want(t, call(t, ts.URL, fromSandbox, HookRun, env("vm", "forged")), OutcomeIllegal, PhaseBooting)
	want(t, call(t, ts.URL, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
}

func TestNewDefaults(t *testing.T) {
	s := New(Options{Lifecycle: newFake()})
	if s.maxConns != DefaultMaxConns || s.readHeader != DefaultReadHeaderTimeout || len(s.audit.entries) != DefaultAuditSize || s.peerOwner == nil || s.log == nil {
		t.Errorf("defaults not applied: %+v", s)
	}
	defer func() {
		if recover() == nil {
			t.Error("New without a Lifecycle did not panic")
		}
	}()
	New(Options{})
}
