package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/proto/events"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
	"github.com/rayito-dev/rayito/rayd/internal/lifeevents"
	"github.com/rayito-dev/rayito/rayd/internal/peercred"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/service/lifecycle"
)

// ExitSandboxTimeout is rayd's exit code when the sandbox's timeout
// expired with on_timeout kill (like timeout(1)).
const ExitSandboxTimeout = 124

// ErrSandboxTimeout is what Run returns when it stopped because the
// sandbox's timeout expired with on_timeout kill; Main exits 124.
var ErrSandboxTimeout = errors.New("the sandbox's timeout expired (on_timeout kill)")

// exitCode is rayd's exit code after Run returned err.
func exitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrSandboxTimeout):
		return ExitSandboxTimeout
	}
	return ExitError
}

// Timings of the lifecycle work.
const (
	// quiesceStreams bounds the wait, at /suspend, for the cut streams to
	// end; quiesceCalls the wait for unary calls in flight; syncWait the
	// wait for the file systems to sync. All three fit in the hooks'
	// suspend budget (24 s).
	quiesceStreams = 2 * time.Second
	quiesceCalls   = 2 * time.Second
	syncWait       = 2 * time.Second
	// expireGrace is the time processes get between SIGTERM and SIGKILL
	// when the sandbox's timeout expires with on_timeout kill; expireWait
	// bounds the whole kill; flushWait the wait for the streams to send
	// their end events before rayd stops serving.
	expireGrace = 3 * time.Second
	expireWait  = 10 * time.Second
	flushWait   = 2 * time.Second
	// eventsFlushWait bounds the wait for the lifecycle event lines to
	// leave, at /suspend and when rayd stops.
	eventsFlushWait = time.Second
	// validateWait bounds /validate's self-check.
	validateWait = 5 * time.Second

	// suspendLine is what rayd writes to -lifecycle-fd to ask the
	// platform to suspend the sandbox.
	suspendLine = "suspend\n"
)

// knobs are test-only settings of a daemon; the zero value (and nil) is
// production.
type knobs struct {
	// peerOwner replaces the hooks' peer lookup (hooks.Options.PeerOwner).
	peerOwner func(local, remote net.Addr) (peercred.Owner, error)
	// grace replaces the deadline's resume grace.
	grace time.Duration
	// staleSuspend and watchdogTick replace the hooks' watchdog timings.
	staleSuspend, watchdogTick time.Duration
	// detachGrace replaces CodeService's detach grace.
	detachGrace time.Duration
	// kernelSpecDirs replaces CodeService's kernelspec directories.
	kernelSpecDirs []string
}

func (k *knobs) get() knobs {
	if k == nil {
		return knobs{}
	}
	return *k
}

// checkLifecycleFD validates -lifecycle-fd: -1 (none) or a descriptor above
// 2 distinct from the other descriptors.
func (c Config) checkLifecycleFD() error {
	fd := c.LifecycleFD
	if fd != -1 && fd < 3 {
		return fmt.Errorf("-lifecycle-fd must be -1 or a descriptor above 2, not %d", fd)
	}
	if fd > 2 && (fd == c.ReadyFD || fd == c.HooksFD || fd == c.MemoryEventsFD) {
		return fmt.Errorf("-lifecycle-fd is the same descriptor (%d) as another descriptor flag", fd)
	}
	return nil
}

// lifecycleFile takes -lifecycle-fd over (close-on-exec, so no process
// rayd starts inherits it), or returns nil without one.
func lifecycleFile(fd int) (*os.File, error) {
	if fd <= 2 {
		return nil, nil
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "lifecycle")
	if f == nil {
		return nil, fmt.Errorf("descriptor %d is not valid", fd)
	}
	return f, nil
}

// wireLifecycle builds the pieces the hooks drive: the suspend gate and the
// deadline. Called by New before the hooks and the API.
func (d *Daemon) wireLifecycle(k knobs) {
	d.quiesce = &quiesce.Gate{}
	d.deadline = deadline.New(deadline.Options{Logger: d.log, Grace: k.grace, OnExpire: d.onExpire})
}

// life implements hooks.Lifecycle over the sandbox state, the suspend gate
// and the deadline.
type life struct{ d *Daemon }

var _ hooks.Lifecycle = life{}

// Run installs the boot configuration and starts the managed lifetime
// when the payload has a lifecycle block.
func (l life) Run(ctx context.Context, microvmID, payload string) hooks.Outcome {
	out := l.d.State.Run(ctx, microvmID, payload)
	if b := l.d.State.Boot(); out == hooks.OutcomeInstalled && b != nil {
		// The payload's network policy is in force (deny-all first)
		// before /run answers. A failure is in Health (the SDK then ends
		// the sandbox): never an open network in its place.
		if err := l.d.Network.Install(ctx, b.Network); err != nil {
			l.d.log.Warn("run: the network policy is not in force", "err_class", "egress")
		}
		if p, ok := deadline.PolicyFrom(b.Lifecycle); ok {
			l.d.deadline.Start(p)
		}
		// Kernels start only now: their keys and seeds are this
		// sandbox's own (nothing unique before /run).
		l.d.Code.OnRun()
		// The template's start command, with this sandbox's
		// configuration.
		l.d.start.Start(b)
	}
	return out
}

// Terminating runs before /terminate answers: the killed event (request)
// leaves now, since the platform may kill rayd as soon as it has the
// answer.
func (l life) Terminating() {
	l.d.events.Killed(events.KillRequest)
	l.d.events.Flush(eventsFlushWait)
}

// Terminate is /terminate, after its answer: the killed event (request)
// if Terminating did not emit it, then every process ends.
func (l life) Terminate(ctx context.Context) {
	l.d.events.Killed(events.KillRequest)
	l.d.telemetry.Stop()
	l.d.State.Terminate(ctx)
}

// Suspend stops the deadline's clock, closes the gate (every stream is cut
// and new calls but Health are refused), waits a little for the streams
// and the calls in flight, and syncs the file systems. Processes keep
// running: their output accumulates in their replay rings.
func (l life) Suspend(ctx context.Context) int {
	start := time.Now()
	l.d.events.Paused()
	l.d.deadline.Pause()
	cut := l.d.quiesce.Close()
	streamsDone := waitBounded(ctx, quiesceStreams, func(ctx context.Context) bool { return l.d.quiesce.Wait(ctx, quiesce.Stream) })
	callsDone := waitBounded(ctx, quiesceCalls, func(ctx context.Context) bool { return l.d.quiesce.Wait(ctx, quiesce.Unary) })
	// The metrics export sends what it holds and a last sample (2 s).
	l.d.flushTelemetry(ctx)
	synced := syncFS(ctx, syncWait)
	// The paused line leaves before the machine can freeze.
	l.d.events.Flush(eventsFlushWait)
	l.d.log.Info("suspend: quiesced", "streams_cut", cut, "streams_done", streamsDone, "calls_done", callsDone,
		"calls_in_flight", l.d.quiesce.InFlight(quiesce.Unary), "synced", synced, "took_ms", time.Since(start).Milliseconds())
	return cut
}

// Resume reopens the gate and restarts the deadline's clock. Nothing of
// rayd's needs reseeding (see hooks.Options.OnResume).
func (l life) Resume(context.Context) {
	l.d.quiesce.Open()
	l.d.deadline.Resume()
	l.d.events.Resumed()
}

// Validate is /validate's self-check: the supervisor starts and reaps a
// trivial process (rayd can fork, exec and reap in this image).
func (l life) Validate(ctx context.Context) error {
	path, err := proc.LookPath("true", "/usr/bin:/bin", "/")
	if err != nil {
		return errValidate("no true(1) to start")
	}
	p, err := l.d.Supervisor.Start(proc.Spec{Path: path, Args: []string{"true"}, Env: []string{}, Dir: "/", Timeout: validateWait})
	if err != nil {
		return errValidate("the supervisor could not start a process")
	}
	ctx, cancel := context.WithTimeout(ctx, validateWait)
	defer cancel()
	select {
	case <-p.Done():
	case <-ctx.Done():
		return errValidate("a trivial process did not end in time")
	}
	if x, _ := p.Exit(); x.Status != proc.StatusExited || x.ExitCode != 0 {
		return errValidate("a trivial process failed")
	}
	return nil
}

type errValidate string

func (e errValidate) Error() string { return "self-check: " + string(e) }

// waitBounded runs wait with a context ending after at most d (or with
// ctx), and reports its result.
func waitBounded(ctx context.Context, d time.Duration, wait func(context.Context) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return wait(ctx)
}

// syncFS flushes every file system's dirty data (sync(2)), waiting at most
// d; a sync that takes longer finishes in the background. It reports
// whether it finished in time.
func syncFS(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		unix.Sync()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// onExpire is the deadline's action.
func (d *Daemon) onExpire(a deadline.Action) {
	switch a {
	case deadline.ActionKill:
		go d.expireKill()
	case deadline.ActionPause:
		d.requestSuspend()
	}
}

// expireKill ends every process with status sandbox_timeout, lets the
// streams deliver their end events, and stops rayd (Run returns
// ErrSandboxTimeout, Main exits 124).
func (d *Daemon) expireKill() {
	d.events.Killed(events.KillTimeout)
	d.log.Warn("lifecycle: the sandbox's timeout expired with on_timeout kill: ending every process; rayd then exits", "exit_code", ExitSandboxTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), expireWait)
	n := d.Supervisor.Expire(ctx, expireGrace)
	cancel()
	flushed := waitBounded(context.Background(), flushWait, func(ctx context.Context) bool { return d.quiesce.Wait(ctx, quiesce.Stream) })
	d.log.Info("lifecycle: processes ended by the sandbox's timeout", "processes", n, "streams_flushed", flushed)
	d.stopWith(ErrSandboxTimeout)
}

// requestSuspend asks the platform, through -lifecycle-fd, to suspend the
// sandbox. Without the descriptor nobody can: the sandbox stays expired.
func (d *Daemon) requestSuspend() {
	d.lcMu.Lock()
	defer d.lcMu.Unlock()
	if d.lcOut == nil {
		d.log.Warn("lifecycle: the sandbox's timeout expired with on_timeout pause, but rayd has no -lifecycle-fd: nobody can suspend it; it stays expired")
		return
	}
	if _, err := io.WriteString(d.lcOut, suspendLine); err != nil {
		d.log.Error("lifecycle: asking the platform to suspend failed; the sandbox stays expired", "err", err)
		return
	}
	d.log.Info("lifecycle: the sandbox's timeout expired with on_timeout pause: asked the platform to suspend it")
}

// setLifecycleOut sets where requestSuspend writes (the -lifecycle-fd).
func (d *Daemon) setLifecycleOut(w io.Writer) {
	d.lcMu.Lock()
	defer d.lcMu.Unlock()
	d.lcOut = w
}

// stopWith stops rayd for reason (the first reason wins).
func (d *Daemon) stopWith(reason error) {
	d.stopMu.Lock()
	if d.stopReason == nil {
		d.stopReason = reason
	}
	d.stopMu.Unlock()
	d.terminated()
}

// StopReason is why the daemon stopped on its own (ErrSandboxTimeout), or
// nil.
func (d *Daemon) StopReason() error {
	d.stopMu.Lock()
	defer d.stopMu.Unlock()
	return d.stopReason
}

// lifeState is what Health reports of the hooks and the timeout.
type lifeState struct{ d *Daemon }

func (s lifeState) HookStatus() hooks.Status { return s.d.Hooks.Status() }

func (s lifeState) HookAudit() ([]hooks.AuditEntry, uint64) {
	return s.d.Hooks.Audit(), s.d.Hooks.Anomalies()
}

func (s lifeState) Timeout() *raydv1.LifecycleState { return lifecycle.Render(s.d.deadline.State()) }

// lifecycleFields are the Daemon's lifecycle state (embedded in Daemon).
type lifecycleFields struct {
	quiesce  *quiesce.Gate
	deadline *deadline.Manager
	serving  atomic.Bool // Serve has started: /ready may answer

	lcMu  sync.Mutex
	lcOut io.Writer // -lifecycle-fd; nil: none

	events *lifeevents.Emitter // the signed lifecycle event lines (events.go)

	stopMu     sync.Mutex
	stopReason error
}
