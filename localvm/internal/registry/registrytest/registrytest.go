// Package registrytest has fakes of the registry's dependencies for tests:
// a launcher whose sandboxes are plain structs, a hooks server standing in
// for rayd's hooks port, and a minter.
package registrytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// ErrGone is what the fake Adopt wraps for a sandbox that is not alive.
var ErrGone = errors.New("registrytest: sandbox gone")

// Launcher is a fake registry.Launcher. Set its fields before use.
type Launcher struct {
	// HooksAddr and APIAddr are given to every instance.
	HooksAddr string
	APIAddr   string
	// LaunchErr makes Launch fail.
	LaunchErr error
	// LaunchGate, when set, makes Launch wait for it (or for ctx).
	LaunchGate chan struct{}
	// Priv is what Privileged reports.
	Priv bool
	// NoSuspend, when set, is what SuspendSupport reports (nil: sandboxes
	// can be suspended).
	NoSuspend error
	// FreezeErr makes every instance's Freeze fail.
	FreezeErr error
	// OOMCounter gives new instances an OOM kill counter (at 0).
	OOMCounter bool
	// NoPool, when set, is what PoolSupport reports (nil: sandboxes can
	// be pre-booted).
	NoPool error
	// AssignErr makes every instance's Assign fail.
	AssignErr error

	mu        sync.Mutex
	launched  []launcher.Spec
	instances map[string]*Instance
	alive     map[string]bool
	cleaned   []launcher.Record
	swept     [][]launcher.Record
}

// Launch records spec and returns a new Instance.
func (l *Launcher) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	if l.LaunchGate != nil {
		select {
		case <-l.LaunchGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.launched = append(l.launched, spec)
	if l.LaunchErr != nil {
		return nil, l.LaunchErr
	}
	rec := launcher.Record{ID: spec.ID, Pid: 4242, PidStartTime: 1, Privileged: l.Priv,
		APIAddr: l.APIAddr, HooksAddr: l.HooksAddr, Internet: spec.Internet, Dir: spec.Dir,
		StartedAt: time.Now().UTC()}
	return l.newInstanceLocked(rec), nil
}

func (l *Launcher) newInstanceLocked(rec launcher.Record) *Instance {
	in := &Instance{rec: rec, done: make(chan struct{}), priv: l.Priv, l: l, suspendReq: make(chan struct{}, 1), oomOK: l.OOMCounter}
	if l.instances == nil {
		l.instances = map[string]*Instance{}
	}
	l.instances[rec.ID] = in
	return in
}

// SetAlive makes Adopt succeed for the ids (and fail for all others).
func (l *Launcher) SetAlive(ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.alive = map[string]bool{}
	for _, id := range ids {
		l.alive[id] = true
	}
}

// Adopt returns a new Instance for an id made alive with SetAlive, and an
// error wrapping ErrGone for any other.
func (l *Launcher) Adopt(rec launcher.Record) (launcher.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.alive[rec.ID] {
		return nil, fmt.Errorf("adopt %s: %w", rec.ID, ErrGone)
	}
	in := l.newInstanceLocked(rec)
	in.adopted = true
	return in, nil
}

// Cleanup records rec.
func (l *Launcher) Cleanup(rec launcher.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleaned = append(l.cleaned, rec)
	return nil
}

// Sweep records keep.
func (l *Launcher) Sweep(keep []launcher.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.swept = append(l.swept, append([]launcher.Record{}, keep...))
	return nil
}

// Privileged reports Priv.
func (l *Launcher) Privileged() bool { return l.Priv }

// SuspendSupport reports NoSuspend.
func (l *Launcher) SuspendSupport() error { return l.NoSuspend }

// PoolSupport reports NoPool.
func (l *Launcher) PoolSupport() error { return l.NoPool }

// Live returns the ids of the instances that have not ended, launched or
// adopted.
func (l *Launcher) Live() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, in := range l.instances {
		select {
		case <-in.done:
		default:
			out = append(out, id)
		}
	}
	return out
}

// Launched returns the specs Launch got.
func (l *Launcher) Launched() []launcher.Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]launcher.Spec{}, l.launched...)
}

// Instance returns the latest instance of id (launched or adopted).
func (l *Launcher) Instance(id string) *Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.instances[id]
}

// Cleaned returns the records Cleanup got.
func (l *Launcher) Cleaned() []launcher.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]launcher.Record{}, l.cleaned...)
}

// Swept returns the arguments of every Sweep call.
func (l *Launcher) Swept() [][]launcher.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]launcher.Record{}, l.swept...)
}

// Instance is a fake launcher.Instance.
type Instance struct {
	l       *Launcher
	rec     launcher.Record
	priv    bool
	adopted bool // its exit status is unknown
	done    chan struct{}
	once    sync.Once

	suspendReq chan struct{}

	mu         sync.Mutex
	status     launcher.ExitStatus
	assigned   []launcher.Assignment
	terminated int
	frozen     bool
	freezes    int
	thaws      int
	oom        uint64
	oomOK      bool
}

func (i *Instance) ID() string { return i.rec.ID }
func (i *Instance) Record() launcher.Record {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.rec
}
func (i *Instance) APIAddr() string       { return i.rec.APIAddr }
func (i *Instance) HooksAddr() string     { return i.rec.HooksAddr }
func (i *Instance) Done() <-chan struct{} { return i.done }
func (i *Instance) GuestAddr(p int) (string, error) {
	if !i.priv {
		return "", errors.New("registrytest: guest ports need a privileged sandbox")
	}
	return "10.0.0.2:" + strconv.Itoa(p), nil
}

// ExitCode reports the code given to Exit (128+n after Kill(n)).
func (i *Instance) ExitCode() (int, bool) {
	st, ok := i.ExitStatus()
	if st.Signal != 0 {
		return 128 + int(st.Signal), ok
	}
	return st.Code, ok
}

// ExitStatus reports what Exit or Kill gave; unknown for an adopted
// instance.
func (i *Instance) ExitStatus() (launcher.ExitStatus, bool) {
	select {
	case <-i.done:
		i.mu.Lock()
		defer i.mu.Unlock()
		return i.status, !i.adopted
	default:
		return launcher.ExitStatus{}, false
	}
}

// Exit simulates rayd exiting by itself with code.
func (i *Instance) Exit(code int) { i.end(launcher.ExitStatus{Code: code}) }

// Kill simulates rayd killed by sig.
func (i *Instance) Kill(sig syscall.Signal) { i.end(launcher.ExitStatus{Signal: sig}) }

func (i *Instance) end(st launcher.ExitStatus) {
	i.once.Do(func() {
		i.mu.Lock()
		i.status = st
		i.frozen = false
		i.mu.Unlock()
		close(i.done)
	})
}

// Terminate counts the call and makes the instance end by SIGKILL.
func (i *Instance) Terminate(context.Context) error {
	i.mu.Lock()
	i.terminated++
	i.mu.Unlock()
	i.Kill(syscall.SIGKILL)
	return nil
}

// Assign records a (or fails with Launcher.AssignErr, or ErrGone once the
// instance has ended).
func (i *Instance) Assign(_ context.Context, a launcher.Assignment) error {
	select {
	case <-i.done:
		return fmt.Errorf("assign %s: %w", i.rec.ID, launcher.ErrGone)
	default:
	}
	if err := i.l.AssignErr; err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.assigned = append(i.assigned, a)
	i.rec.Internet = a.Internet
	return nil
}

// Assigned returns the assignments Assign got.
func (i *Instance) Assigned() []launcher.Assignment {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]launcher.Assignment{}, i.assigned...)
}

// Terminated counts Terminate calls.
func (i *Instance) Terminated() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.terminated
}

// Freeze marks the instance frozen (or fails with Launcher.FreezeErr).
func (i *Instance) Freeze(context.Context) error {
	if err := i.l.NoSuspend; err != nil {
		return err
	}
	if err := i.l.FreezeErr; err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.frozen = true
	i.freezes++
	return nil
}

// Thaw marks the instance thawed.
func (i *Instance) Thaw(context.Context) error {
	if err := i.l.NoSuspend; err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.frozen = false
	i.thaws++
	return nil
}

// Frozen reports whether the instance is frozen, and how many Freeze and
// Thaw calls it had.
func (i *Instance) Frozen() (frozen bool, freezes, thaws int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.frozen, i.freezes, i.thaws
}

// SetOOMKills sets the OOM kill counter OOMKills reports.
func (i *Instance) SetOOMKills(n uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.oom, i.oomOK = n, true
}

// OOMKills reports what SetOOMKills set (ok false before).
func (i *Instance) OOMKills() (uint64, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.oom, i.oomOK
}

// OOMBaseline is OOMKills while the instance has not ended.
func (i *Instance) OOMBaseline() (uint64, bool) {
	select {
	case <-i.done:
		return 0, false
	default:
		return i.OOMKills()
	}
}

// SuspendRequests delivers RequestSuspend's requests.
func (i *Instance) SuspendRequests() <-chan struct{} { return i.suspendReq }

// RequestSuspend simulates rayd asking to be suspended.
func (i *Instance) RequestSuspend() {
	select {
	case i.suspendReq <- struct{}{}:
	default:
	}
}

// RunCall is one run hook call the Hooks server got.
type RunCall struct {
	MicrovmID      string `json:"microvmId"`
	RunHookPayload string `json:"runHookPayload"`
}

// Hooks is a fake rayd hooks port.
type Hooks struct {
	Server *httptest.Server

	mu           sync.Mutex
	runStatus    int
	runDelay     time.Duration
	runs         []RunCall
	terminates   []string
	resumeStatus int
	resumeDelay  time.Duration
	calls        map[string]int
}

// NewHooks starts a hooks server answering /run with 200 until told
// otherwise; it stops when t ends.
func NewHooks(t testing.TB) *Hooks {
	h := &Hooks{runStatus: http.StatusOK, resumeStatus: http.StatusOK, calls: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Server.Close)
	return h
}

// Addr is the server's host:port.
func (h *Hooks) Addr() string { return h.Server.Listener.Addr().String() }

// SetRun sets /run's status and a delay before it answers.
func (h *Hooks) SetRun(status int, delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runStatus, h.runDelay = status, delay
}

// SetResume sets /resume's status and a delay before it answers.
func (h *Hooks) SetResume(status int, delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resumeStatus, h.resumeDelay = status, delay
}

// Calls counts the calls of hook ("suspend", "resume", ...).
func (h *Hooks) Calls(hook string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[hook]
}

// Runs returns the /run calls so far.
func (h *Hooks) Runs() []RunCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RunCall{}, h.runs...)
}

// Terminates returns how many /terminate calls arrived.
func (h *Hooks) Terminates() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.terminates)
}

func (h *Hooks) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.calls[strings.TrimPrefix(r.URL.Path, "/aws/lambda-microvms/runtime/v1/")]++
	h.mu.Unlock()
	switch r.URL.Path {
	case "/aws/lambda-microvms/runtime/v1/run":
		var c RunCall
		_ = json.Unmarshal(body, &c)
		h.mu.Lock()
		h.runs = append(h.runs, c)
		status, delay := h.runStatus, h.runDelay
		h.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"hook":"run"}`)
	case "/aws/lambda-microvms/runtime/v1/ready":
		_, _ = io.WriteString(w, `{"hook":"ready"}`)
	case "/aws/lambda-microvms/runtime/v1/suspend":
		_, _ = io.WriteString(w, `{"hook":"suspend"}`)
	case "/aws/lambda-microvms/runtime/v1/resume":
		h.mu.Lock()
		status, delay := h.resumeStatus, h.resumeDelay
		h.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"hook":"resume"}`)
	case "/aws/lambda-microvms/runtime/v1/terminate":
		h.mu.Lock()
		h.terminates = append(h.terminates, string(body))
		h.mu.Unlock()
		_, _ = io.WriteString(w, `{"hook":"terminate"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// Minter is a fake registry.Minter: tokens are "tok.<id>.<ttl>".
type Minter struct {
	// Err makes Mint fail.
	Err error

	mu    sync.Mutex
	calls int
	ports []microvmsapi.AllowedPort
}

// Mint returns a fake token.
func (m *Minter) Mint(id string, ports []microvmsapi.AllowedPort, ttl time.Duration) (string, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.ports = append([]microvmsapi.AllowedPort(nil), ports...)
	if m.Err != nil {
		return "", time.Time{}, m.Err
	}
	return fmt.Sprintf("tok.%s.%d", id, int(ttl/time.Minute)), time.Now().Add(ttl), nil
}

// LastPorts returns the allowed ports of the last Mint call.
func (m *Minter) LastPorts() []microvmsapi.AllowedPort {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]microvmsapi.AllowedPort(nil), m.ports...)
}

// Calls counts Mint calls.
func (m *Minter) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}
