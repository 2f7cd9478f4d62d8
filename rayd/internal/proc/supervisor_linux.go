package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

// reapInterval is how often the reaper polls even without SIGCHLD.
const reapInterval = 5 * time.Second

// errGroupGone is returned by killGroup when the process group is empty.
var errGroupGone = errors.New("proc: process group is gone")

// platform holds the Linux-specific state of a Supervisor.
type platform struct {
	devNull    *os.File       // stdin of children without Spec.Stdin
	sigch      chan os.Signal // SIGCHLD notifications
	privileged bool           // CAP_SYS_RESOURCE: hard rlimits can be set and restored
	oomWarned  bool           // the oom_score_adj warning was logged (under Supervisor.mu)
}

func (pl *platform) init(s *Supervisor) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("proc: PR_SET_CHILD_SUBREAPER: %w", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("proc: open %s: %w", os.DevNull, err)
	}
	pl.devNull = devNull
	// CAP_SYS_RESOURCE of a user namespace other than the initial one
	// (localvm's sandboxes) does not let rayd raise a hard limit back.
	pl.privileged = hasCapSysResource() && initialUserNamespace()
	if !pl.privileged && os.Geteuid() == 0 {
		pinRootLimits(s)
	}
	pl.sigch = make(chan os.Signal, 1)
	signal.Notify(pl.sigch, syscall.SIGCHLD)
	s.bg.Add(1)
	go pl.reapLoop(s)
	return nil
}

// stop runs after the reaper has exited. rayd stops being a subreaper, so
// that later orphans go to init instead of turning into zombies nobody
// reaps.
func (pl *platform) stop() {
	signal.Stop(pl.sigch)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	_ = pl.devNull.Close()
}

// reapLoop is the only place where children are waited for. It runs until
// the supervisor's quit channel is closed, reaping on every SIGCHLD and on
// a ticker (signals coalesce, and a missed one must not leave a zombie).
func (pl *platform) reapLoop(s *Supervisor) {
	defer s.bg.Done()
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		reapAll(s)
		select {
		case <-pl.sigch:
		case <-t.C:
		case <-s.quit:
			reapAll(s)
			return
		}
	}
}

// reapAll collects every exited child without blocking. __WALL also
// catches descendants cloned with an exit signal other than SIGCHLD.
func reapAll(s *Supervisor) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none exited
		}
		switch {
		case ws.Exited():
			s.reaped(pid, rawExit{exited: true, code: ws.ExitStatus()})
		case ws.Signaled():
			s.reaped(pid, rawExit{sig: ws.Signal()})
		}
	}
}

// killGroup sends sig to the process group pgid.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return errGroupGone // never kill(0) or kill(-1)
	}
	err := unix.Kill(-pgid, sig)
	if err == unix.ESRCH {
		return errGroupGone
	}
	return err
}

// spawn forks and execs the child. The caller holds s.mu, which also
// serialises the rlimit switching below.
//
// Resource limits are inherited through fork and execve, and Go offers no
// hook between the two, so the child's limits are installed on rayd itself
// for the duration of the fork: rayd's current values are saved, the
// child's values are set, os.StartProcess forks (CLONE_VFORK: it returns
// once the child has exec'd or failed) and rayd's values are restored. The
// child therefore runs its first instruction with its limits in place. The
// limits are set through prlimit on pid 0, which also tells
// os.StartProcess not to re-raise RLIMIT_NOFILE in the child.
//
// With ctty the child starts a new session (and so a new process group
// with the same id) and files[0] becomes its controlling terminal;
// otherwise it only starts a new process group.
func (pl *platform) spawn(s *Supervisor, path string, argv, env []string, dir string, id *identity.Identity, files []*os.File, ctty bool) (int, error) {
	sys := &syscall.SysProcAttr{Setpgid: true}
	if ctty {
		// setpgid would fail on a session leader; setsid already made the
		// child the leader of a new group. Ctty is the child's fd number.
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if id != nil {
		groups := make([]uint32, len(id.Groups))
		copy(groups, id.Groups)
		sys.Credential = &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: groups}
	}
	attr := &os.ProcAttr{Dir: dir, Env: env, Files: files, Sys: sys}

	// Go opens its own descriptors close-on-exec, but rayd may have
	// inherited some without the flag (from whatever started it); none of
	// them may reach the child.
	if err := markCloexec(); err != nil {
		return 0, fmt.Errorf("proc: start: mark descriptors close-on-exec: %w", err)
	}
	restore, err := pl.setChildRlimits(s)
	if err != nil {
		return 0, fmt.Errorf("proc: start: set rlimits: %w", err)
	}
	restoreOOM := pl.raiseOOMScoreForFork(s.log)
	child, err := os.StartProcess(path, argv, attr)
	restoreOOM()
	restore()
	if err != nil {
		return 0, startErrno(err)
	}
	pid := child.Pid
	// Never Wait on it (the reaper does); Release only drops the pidfd.
	_ = child.Release()
	return pid, nil
}

// childOOMScore is the oom_score_adj rayd's children start with: user
// processes are the OOM killer's first victims, not rayd (which localvm
// sets to -1000, a value children would otherwise inherit).
const childOOMScore = "1000"

// raiseOOMScoreForFork gives rayd childOOMScore for the duration of a fork,
// like the rlimits above, so that the child has it from its first
// instruction (setting it after the fork would leave a window in which the
// child can fork with rayd's score), and returns the function restoring
// rayd's own. Raising needs no privilege; going back down is allowed down
// to the floor (oom_score_adj_min) the platform set with rayd's score.
// Where rayd may not write its own score (a non-dumpable rayd in an
// unprivileged user namespace) it says so once.
func (pl *platform) raiseOOMScoreForFork(log *slog.Logger) (restore func()) {
	const path = "/proc/self/oom_score_adj"
	b, err := os.ReadFile(path)
	own := strings.TrimSpace(string(b))
	if err != nil || own == childOOMScore {
		return func() {}
	}
	if err := os.WriteFile(path, []byte(childOOMScore), 0); err != nil {
		if !pl.oomWarned {
			pl.oomWarned = true
			log.Warn("proc: cannot raise the oom_score_adj of children: they start with rayd's", "err", err)
		}
		return func() {}
	}
	return func() {
		if err := os.WriteFile(path, []byte(own), 0); err != nil {
			log.Error("proc: restoring rayd's oom_score_adj failed", "err", err)
		}
	}
}

// markCloexec sets FD_CLOEXEC on every descriptor from 3 up.
func markCloexec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: walk /proc/self/fd instead.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	for _, e := range ents {
		fd, aerr := strconv.Atoi(e.Name())
		if aerr != nil || fd < 3 {
			continue
		}
		// F_SETFD replaces the descriptor flags; FD_CLOEXEC is the only one.
		// EBADF is the descriptor ReadDir used, closed meanwhile.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && ferr != unix.EBADF {
			return ferr
		}
	}
	return nil
}

// startErrno converts an os.StartProcess error, which names the path, into
// an error that does not.
func startErrno(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return newStartError("fork/exec failed")
	}
	switch errno {
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.ENAMETOOLONG:
		return newStartError("executable not found", ErrNotFound, fs.ErrNotExist, errno)
	case unix.EACCES, unix.EPERM:
		return newStartError("permission denied", fs.ErrPermission, errno)
	}
	return newStartError("fork/exec: "+errno.Error(), errno)
}

type rlimitSetting struct {
	resource int
	value    uint64
}

// setChildRlimits installs the child limits on rayd and returns a function
// restoring rayd's own values.
func (pl *platform) setChildRlimits(s *Supervisor) (restore func(), err error) {
	want := [...]rlimitSetting{
		{unix.RLIMIT_NOFILE, s.opts.Rlimits.Nofile},
		{unix.RLIMIT_NPROC, s.opts.Rlimits.Nproc},
		{unix.RLIMIT_CORE, s.opts.Rlimits.Core},
	}
	var saved [len(want)]unix.Rlimit
	var changed [len(want)]bool
	restore = func() {
		for i := len(want) - 1; i >= 0; i-- {
			if !changed[i] {
				continue
			}
			if err := unix.Prlimit(0, want[i].resource, &saved[i], nil); err != nil {
				s.log.Error("proc: restoring rlimit failed", "resource", want[i].resource, "err", err)
			}
		}
	}
	for i, w := range want {
		if err := unix.Prlimit(0, w.resource, nil, &saved[i]); err != nil {
			restore()
			return nil, err
		}
		child := saved[i]
		if pl.privileged {
			child = unix.Rlimit{Cur: w.value, Max: w.value}
		} else {
			// Without CAP_SYS_RESOURCE a lowered hard limit could not be
			// raised back: lower only the soft one.
			child.Cur = min(w.value, saved[i].Max)
		}
		if child == saved[i] {
			continue
		}
		if err := unix.Prlimit(0, w.resource, &child, nil); err != nil {
			restore()
			return nil, err
		}
		changed[i] = true
	}
	return restore, nil
}

// pinRootLimits handles a root rayd without CAP_SYS_RESOURCE (Docker and
// other runtimes drop it): it could not raise a hard limit back after a
// fork, so it lowers its own hard limits once, for good, and children
// inherit them exactly. RLIMIT_CORE costs rayd nothing. RLIMIT_NOFILE at
// 4096 leaves rayd room: its connections, pipes and files are capped far
// below that. RLIMIT_NPROC is pinned only in the initial user namespace,
// where root is exempt from it; in a user namespace root's own threads and
// processes count, so there it stays a soft limit (a cgroup pids limit is
// the hard bound there).
func pinRootLimits(s *Supervisor) {
	pins := []rlimitSetting{
		{unix.RLIMIT_CORE, s.opts.Rlimits.Core},
		{unix.RLIMIT_NOFILE, s.opts.Rlimits.Nofile},
	}
	if initialUserNamespace() {
		pins = append(pins, rlimitSetting{unix.RLIMIT_NPROC, s.opts.Rlimits.Nproc})
	}
	for _, w := range pins {
		var cur unix.Rlimit
		if err := unix.Prlimit(0, w.resource, nil, &cur); err != nil || cur.Max <= w.value {
			continue
		}
		lim := unix.Rlimit{Cur: min(cur.Cur, w.value), Max: w.value}
		if w.resource == unix.RLIMIT_NOFILE {
			lim.Cur = w.value
		}
		// syscall.Setrlimit for NOFILE also stops os/exec from restoring
		// the pre-start soft limit in children.
		if err := syscall.Setrlimit(w.resource, &syscall.Rlimit{Cur: lim.Cur, Max: lim.Max}); err != nil {
			s.log.Warn("proc: cannot pin an rlimit", "resource", w.resource, "err", err)
		}
	}
	s.log.Warn("proc: no CAP_SYS_RESOURCE: rayd pinned its own hard limits for its children")
}

// initialUserNamespace reports whether this process runs in the initial
// user namespace (its uid map is the identity over the whole range).
func initialUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// hasCapSysResource reports whether CAP_SYS_RESOURCE is in rayd's effective
// capability set.
func hasCapSysResource() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
}
