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
	"sync"
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
	in := &Instance{rec: rec, done: make(chan struct{}), priv: l.Priv}
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
	return l.newInstanceLocked(rec), nil
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
	rec  launcher.Record
	priv bool
	done chan struct{}
	once sync.Once

	mu         sync.Mutex
	code       int
	terminated int
}

func (i *Instance) ID() string              { return i.rec.ID }
func (i *Instance) Record() launcher.Record { return i.rec }
func (i *Instance) APIAddr() string         { return i.rec.APIAddr }
func (i *Instance) HooksAddr() string       { return i.rec.HooksAddr }
func (i *Instance) Done() <-chan struct{}   { return i.done }
func (i *Instance) GuestAddr(p int) (string, error) {
	if !i.priv {
		return "", errors.New("registrytest: guest ports need a privileged sandbox")
	}
	return "10.0.0.2:" + strconv.Itoa(p), nil
}

// ExitCode reports the code given to Exit.
func (i *Instance) ExitCode() (int, bool) {
	select {
	case <-i.done:
		i.mu.Lock()
		defer i.mu.Unlock()
		return i.code, true
	default:
		return 0, false
	}
}

// Exit simulates rayd exiting by itself with code.
func (i *Instance) Exit(code int) {
	i.once.Do(func() {
		i.mu.Lock()
		i.code = code
		i.mu.Unlock()
		close(i.done)
	})
}

// Terminate counts the call and makes the instance exit with 137.
func (i *Instance) Terminate(context.Context) error {
	i.mu.Lock()
	i.terminated++
	i.mu.Unlock()
	i.Exit(137)
	return nil
}

// Terminated counts Terminate calls.
func (i *Instance) Terminated() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.terminated
}

// RunCall is one run hook call the Hooks server got.
type RunCall struct {
	MicrovmID      string `json:"microvmId"`
	RunHookPayload string `json:"runHookPayload"`
}

// Hooks is a fake rayd hooks port.
type Hooks struct {
	Server *httptest.Server

	mu         sync.Mutex
	runStatus  int
	runDelay   time.Duration
	runs       []RunCall
	terminates []string
}

// NewHooks starts a hooks server answering /run with 200 until told
// otherwise; it stops when t ends.
func NewHooks(t testing.TB) *Hooks {
	h := &Hooks{runStatus: http.StatusOK}
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
