package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
)

// instance is a sandbox launched or adopted by a Launcher.
type instance struct {
	l    *Launcher
	rec  Record
	slot netip.Prefix

	cmd *exec.Cmd // our child; nil when adopted

	slirp *slirp // rootless with Internet: its network stack; nil otherwise

	pidMu sync.Mutex
	pidfd int // adopted: a pidfd of the init until it exits, else -1

	done     chan struct{}
	doneOnce sync.Once
	code     int
	codeOK   bool
	status   ExitStatus

	// oomFile is the cgroup file counting the sandbox's OOM kills ("" if
	// none).
	oomFile string
	// lifecycle is the platform's end of the sandbox's lifecycle FIFO
	// (nil if none): rayd writes "suspend\n" to it. It is closed once
	// rayd has exited; the reader then delivers nothing more on suspendReq.
	lcMu       sync.Mutex
	lifecycle  *os.File // lcMu
	lcClosed   bool     // lcMu: finished; no FIFO is read any more
	suspendReq chan struct{}

	termMu  sync.Mutex
	cleaned bool

	// memBytes and pidsMax are the limits a privileged sandbox was
	// launched with (0 when adopted): Assign keeps them.
	memBytes int64
	pidsMax  int

	// svc serves the platform's services to its rayd (nil: none).
	svc *services
}

func (i *instance) ID() string        { return i.rec.ID }
func (i *instance) APIAddr() string   { return i.rec.APIAddr }
func (i *instance) HooksAddr() string { return i.rec.HooksAddr }

func (i *instance) Record() Record {
	r := i.rec
	r.Cgroups = append([]string(nil), i.rec.Cgroups...)
	return r
}

// GuestAddr returns a host-reachable address of a guest port. Unprivileged
// sandboxes share the host's network: only rayd's own ports (8080, 9000)
// map to an address, so that nothing else of the host's loopback is
// reachable through it.
func (i *instance) GuestAddr(port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("launcher: port %d out of range", port)
	}
	if i.rec.Privileged {
		return net.JoinHostPort(i.rec.GuestIP, strconv.Itoa(port)), nil
	}
	if i.rec.Rootless {
		// Launcher.DialContext reaches it through the dial socket.
		return net.JoinHostPort(i.rec.ID+rootlessHostSuffix, strconv.Itoa(port)), nil
	}
	switch port {
	case guestAPIPort:
		return i.rec.APIAddr, nil
	case guestHooksPort:
		return i.rec.HooksAddr, nil
	}
	return "", fmt.Errorf("launcher: port %d: unprivileged sandboxes expose only rayd's API: %w", port, ErrNotPrivileged)
}

func (i *instance) Done() <-chan struct{} { return i.done }

// ExitCode returns rayd's exit status once Done is closed: its exit code,
// or 128+n when it was killed by signal n. ok is false before that and for
// adopted sandboxes, whose status only their parent could collect.
func (i *instance) ExitCode() (int, bool) {
	select {
	case <-i.done:
		return i.code, i.codeOK
	default:
		return 0, false
	}
}

// ExitStatus returns how rayd ended once Done is closed; see ExitCode.
func (i *instance) ExitStatus() (ExitStatus, bool) {
	select {
	case <-i.done:
		return i.status, i.codeOK
	default:
		return ExitStatus{}, false
	}
}

func (i *instance) finish(st ExitStatus, ok bool) {
	i.doneOnce.Do(func() {
		i.status, i.codeOK = st, ok
		i.code = st.Code
		if st.Signal != 0 {
			i.code = 128 + int(st.Signal)
		}
		i.lcMu.Lock()
		if i.lifecycle != nil {
			_ = i.lifecycle.Close() // ends readLifecycle
		}
		i.lcClosed = true
		i.lcMu.Unlock()
		close(i.done)
	})
}

// Freeze freezes the sandbox's cgroup and waits until it is frozen.
func (i *instance) Freeze(ctx context.Context) error { return i.freeze(ctx, true) }

// Thaw thaws the sandbox's cgroup and waits until it runs again.
func (i *instance) Thaw(ctx context.Context) error { return i.freeze(ctx, false) }

func (i *instance) freeze(ctx context.Context, frozen bool) error {
	if !i.rec.Privileged {
		return ErrNoFreezer
	}
	i.termMu.Lock() // not while Terminate removes the cgroups
	defer i.termMu.Unlock()
	if i.cleaned {
		return fmt.Errorf("launcher: sandbox %s: %w", i.rec.ID, ErrGone)
	}
	dir, v2 := cgroup.FreezerOf(i.rec.Cgroups)
	if dir == "" {
		return fmt.Errorf("%w: the sandbox has no freezer cgroup", ErrNoFreezer)
	}
	return cgroup.SetFrozen(ctx, dir, v2, frozen)
}

// OOMKills reads the oom_kill counter of the sandbox's memory cgroup.
func (i *instance) OOMKills() (uint64, bool) {
	if i.oomFile == "" {
		return 0, false
	}
	b, err := os.ReadFile(i.oomFile)
	if err != nil {
		return 0, false
	}
	return cgroup.ParseOOMKill(b)
}

// OOMBaseline reads the OOM kill counter while rayd is alive and nothing
// is killing it (see runningUntouched): ok is false otherwise.
func (i *instance) OOMBaseline() (uint64, bool) {
	n, ok := i.OOMKills()
	if !ok || !i.alive() || !runningUntouched(i.rec.Pid, i.rec.PidStartTime) {
		return 0, false
	}
	return n, true
}

// SuspendRequests delivers rayd's suspend requests (see Instance).
func (i *instance) SuspendRequests() <-chan struct{} { return i.suspendReq }

// Lifecycle FIFO protocol: rayd writes one line per request. Only
// "suspend" means something; a line longer than maxLifecycleLine is
// dropped whole, anything else is ignored. Nothing of what rayd writes is
// ever logged.
const (
	lifecycleFIFO    = "lifecycle"
	maxLifecycleLine = 64
)

// startLifecycle makes f the instance's lifecycle FIFO and reads it until
// it is closed (finish closes it once rayd has exited). Call it before the
// instance is handed out (SuspendRequests reads suspendReq unlocked).
func (i *instance) startLifecycle(f *os.File) {
	i.suspendReq = make(chan struct{}, 1)
	i.lcMu.Lock()
	defer i.lcMu.Unlock()
	if i.lcClosed { // rayd is gone already
		_ = f.Close()
		return
	}
	i.lifecycle = f
	go i.readLifecycle(f)
}

func (i *instance) readLifecycle(f *os.File) {
	buf := make([]byte, 512)
	line := make([]byte, 0, maxLifecycleLine)
	over, ignored := false, 0
	for {
		n, err := f.Read(buf)
		for _, c := range buf[:n] {
			if c != '\n' {
				if len(line) < maxLifecycleLine {
					line = append(line, c)
				} else {
					over = true
				}
				continue
			}
			if !over && string(line) == "suspend" {
				select {
				case i.suspendReq <- struct{}{}:
				default: // one is pending already
				}
			} else {
				ignored++
			}
			line, over = line[:0], false
		}
		if err != nil {
			if ignored > 0 {
				i.l.log.Debug("launcher: lifecycle lines ignored", "id", i.rec.ID, "count", ignored)
			}
			return
		}
	}
}

// attachChild records the started init and waits for it in the background.
func (i *instance) attachChild(s *started) {
	i.cmd = s.cmd
	i.rec.Pid = s.pid
	i.rec.StartedAt = time.Now().UTC()
	go func() {
		_ = s.cmd.Wait()
		st := s.cmd.ProcessState
		es := ExitStatus{Code: st.ExitCode()}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			es = ExitStatus{Signal: ws.Signal()}
		}
		i.finish(es, true)
	}()
}

// watch waits for an adopted init to exit (pidfd, else /proc polling).
func (i *instance) watch() {
	i.pidMu.Lock()
	fd := i.pidfd
	i.pidMu.Unlock()
	if fd < 0 || !waitPidfd(fd) {
		for sameProcess(i.rec.Pid, i.rec.PidStartTime) {
			time.Sleep(500 * time.Millisecond)
		}
	}
	i.pidMu.Lock()
	if i.pidfd >= 0 {
		unix.Close(i.pidfd)
		i.pidfd = -1
	}
	i.pidMu.Unlock()
	i.finish(ExitStatus{}, false)
}

// signal sends sig to the init, race-free against pid reuse.
func (i *instance) signal(sig syscall.Signal) {
	if i.cmd != nil {
		_ = i.cmd.Process.Signal(sig)
		return
	}
	i.pidMu.Lock()
	defer i.pidMu.Unlock()
	if i.pidfd >= 0 {
		_ = unix.PidfdSendSignal(i.pidfd, sig, nil, 0)
	}
}

// alive reports whether the init has not exited yet.
func (i *instance) alive() bool {
	select {
	case <-i.done:
		return false
	default:
		return true
	}
}

// Terminate kills everything in the sandbox, waits for its init (at most
// 10 s) and removes every trace of it. Idempotent; after an error it can be
// called again.
func (i *instance) Terminate(ctx context.Context) error {
	i.termMu.Lock()
	defer i.termMu.Unlock()
	if i.cleaned {
		return nil
	}
	if err := i.destroy(ctx); err != nil {
		return err
	}
	i.cleaned = true
	i.l.forget(i)
	i.l.log.Info("launcher: sandbox terminated", "id", i.rec.ID)
	return nil
}

// waitDone waits for the init to exit until deadline or ctx ends.
func (i *instance) waitDone(ctx context.Context, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-i.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return !i.alive()
}

// destroy kills the sandbox and removes its resources.
func (i *instance) destroy(ctx context.Context) error {
	if i.cmd == nil {
		i.pidMu.Lock()
		noProc := i.pidfd < 0
		i.pidMu.Unlock()
		if noProc && !sameProcess(i.rec.Pid, i.rec.PidStartTime) {
			i.finish(ExitStatus{}, false) // never started, or already gone
		}
	}
	deadline := time.Now().Add(terminateTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var errs []error
	if i.rec.Rootless {
		if i.alive() {
			i.signal(syscall.SIGKILL) // the kernel then kills the whole pid namespace
		}
	} else if i.rec.Privileged {
		if i.alive() {
			i.signal(syscall.SIGKILL) // the kernel then kills the whole pid namespace
		}
		// Killed tasks of a frozen (suspended) sandbox die only once it
		// is thawed.
		cgroup.Thaw(i.rec.Cgroups)
		if err := cgroup.Kill(i.rec.Cgroups, deadline); err != nil {
			errs = append(errs, err)
		}
	} else if i.alive() {
		i.stopPlain(ctx, deadline)
	}
	if !i.waitDone(ctx, deadline) {
		return errors.Join(append(errs, fmt.Errorf("launcher: sandbox %s: init still running after SIGKILL", i.rec.ID))...)
	}
	if i.slirp != nil {
		// It exits by itself once rayd is gone (its exit pipe hangs up):
		// make sure, and reap it.
		if err := i.slirp.stop(deadline); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	if i.rec.Privileged {
		if err := cgroup.Remove(i.rec.Cgroups, deadline); err != nil {
			errs = append(errs, err)
		}
		// While the veth exists no other sandbox can have the address,
		// and with nothing left in the sandbox no new flow of it starts.
		if g, err := netip.ParseAddr(i.rec.GuestIP); err == nil {
			i.l.flushConntrack(g)
		}
		if i.rec.Veth != "" {
			if err := i.l.net.Delete(i.rec.Veth); err != nil {
				errs = append(errs, err)
			}
		}
		id := i.rec.ID
		if err := i.l.fw.Remove(func(s string) bool { return s == id }); err != nil {
			errs = append(errs, err)
		}
	}

	i.svc.close()
	if err := os.RemoveAll(filepath.Join(i.rec.Dir, servicesDirName)); err != nil {
		errs = append(errs, err)
	}
	if err := removeLauncherFiles(i.rec.Dir); err != nil {
		errs = append(errs, err)
	}
	// The uid range goes last, once nothing runs and no file of the
	// sandbox is left with its ids, so that another sandbox may get it.
	if i.rec.UIDBase != 0 && len(errs) == 0 {
		if err := i.l.freeUIDs(i.rec.UIDBase, i.rec.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if i.slot.IsValid() {
		i.l.releaseSlot(i.slot, i.rec.ID)
	}
	return errors.Join(errs...)
}

// stopPlain stops an unprivileged rayd: SIGTERM to its process group (rayd
// then stops its user processes), SIGKILL after a grace period, then
// SIGKILL to whatever of its process tree survived.
func (i *instance) stopPlain(ctx context.Context, deadline time.Time) {
	tree := descendants(i.rec.Pid)
	pgid := i.rec.Pid
	group := func(sig syscall.Signal) {
		if i.alive() && (i.cmd != nil || sameProcess(i.rec.Pid, i.rec.PidStartTime)) {
			_ = unix.Kill(-pgid, sig)
		}
	}
	group(syscall.SIGTERM)
	i.signal(syscall.SIGTERM)
	grace := time.Now().Add(plainGrace)
	if grace.After(deadline) {
		grace = deadline
	}
	if !i.waitDone(ctx, grace) {
		group(syscall.SIGKILL)
		i.signal(syscall.SIGKILL)
		i.waitDone(ctx, deadline)
	}
	for pid, start := range tree {
		if sameProcess(pid, start) {
			_ = unix.Kill(pid, syscall.SIGKILL)
		}
	}
}
