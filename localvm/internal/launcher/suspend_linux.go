package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
	"github.com/rayito-dev/rayito/rayd"
)

// Suspend support: the cgroup freezer (Instance.Freeze), rayd's view of
// its cgroup's OOM kills, and the lifecycle channel through which rayd
// asks to be suspended.
//
// A privileged sandbox's rayd gets two descriptors, when this rayd knows
// the flags (see raydFlags):
//
//   - -memory-events-fd: the sandbox cgroup's memory.events (v2) or
//     memory.oom_control (v1), opened read-only by the launcher (the init
//     could not open it: its mount namespace has no /sys);
//   - -lifecycle-fd: the write end of the sandbox's lifecycle FIFO,
//     <Dir>/launcher/lifecycle (0600, the platform's; outside the
//     sandbox's filesystem). rayd writes "suspend\n" when its lifecycle
//     deadline with on_timeout=pause expires, and the platform suspends the
//     sandbox. The platform holds the FIFO open read-write, so rayd's
//     write never blocks while it runs; a restarted platform reopens the
//     FIFO when it adopts the sandbox (a request written while no platform
//     ran is lost: rayd's write then fails with EPIPE).
//
// Both travel with the go byte (SCM_RIGHTS), close-on-exec: rayd holds
// them, and no process it starts inherits them (it passes only 0-2).

// Flags of rayd for the two descriptors.
const (
	raydMemoryEventsFlag = "-memory-events-fd"
	raydLifecycleFlag    = "-lifecycle-fd"
)

// Names of the descriptors that may come with the go byte after the
// launcher directory's (initConfig.ExtraFDs).
const (
	fdSlirpExit    = "slirp-exit"
	fdMemoryEvents = "memory-events"
	fdLifecycle    = "lifecycle"
)

var (
	raydFlagsOnce sync.Once
	raydFlagSet   map[string]bool
)

// raydFlags reports which of the descriptor flags this binary's rayd
// accepts (its -h output lists them): a rayd from before them would refuse
// to start with an unknown flag. The init runs this same rayd in-process.
func raydFlags() map[string]bool {
	raydFlagsOnce.Do(func() {
		var usage bytes.Buffer
		rayd.Main([]string{"-h"}, io.Discard, &usage)
		raydFlagSet = map[string]bool{}
		for _, f := range []string{raydMemoryEventsFlag, raydLifecycleFlag} {
			u := usage.String()
			raydFlagSet[f] = strings.Contains(u, "  "+f+" ") || strings.Contains(u, "  "+f+"\n")
		}
	})
	return raydFlagSet
}

// SuspendSupport reports whether this launcher's sandboxes can be
// suspended: nil when they have a cgroup freezer (root), otherwise an
// error wrapping ErrNoFreezer that names why not.
func (l *Launcher) SuspendSupport() error {
	switch {
	case l.priv && l.cgErr == nil:
		return nil
	case l.priv:
		return fmt.Errorf("%w, and this platform has no usable cgroups", ErrNoFreezer)
	case l.rootless:
		return fmt.Errorf("%w: this platform runs %s (no cgroups)", ErrNoFreezer, IsolationRootless)
	}
	return fmt.Errorf("%w: this platform runs unisolated (no cgroups)", ErrNoFreezer)
}

// openMemoryEvents opens the OOM counter file of a sandbox's cgroups
// read-only for rayd; -1 when there is none.
func openMemoryEvents(dirs []string) (int, error) {
	p := cgroup.MemoryEventsFile(dirs)
	if p == "" {
		return -1, nil
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("launcher: opening the cgroup's memory events: %w", err)
	}
	return fd, nil
}

// makeLifecycle creates the lifecycle FIFO in the launcher directory ld
// and returns the platform's end (open read-write, non-blocking, so that
// the runtime poller serves it and Close ends a pending Read) and the
// write end for rayd.
func makeLifecycle(ld string) (*os.File, int, error) {
	p := filepath.Join(ld, lifecycleFIFO)
	if err := unix.Mkfifo(p, 0o600); err != nil {
		return nil, -1, fmt.Errorf("launcher: lifecycle fifo: %w", err)
	}
	f, err := openLifecycle(ld)
	if err != nil {
		return nil, -1, err
	}
	// A reader exists (f): this open does not block.
	w, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		f.Close()
		return nil, -1, fmt.Errorf("launcher: lifecycle fifo: %w", err)
	}
	return f, w, nil
}

// errNoLifecycle: the sandbox has no lifecycle FIFO (launched without one).
var errNoLifecycle = errors.New("launcher: no lifecycle fifo")

// openLifecycle opens the platform's end of the lifecycle FIFO in ld: it
// must be a FIFO of this user, not a link.
func openLifecycle(ld string) (*os.File, error) {
	p := filepath.Join(ld, lifecycleFIFO)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, errNoLifecycle
	}
	if err != nil {
		return nil, fmt.Errorf("launcher: lifecycle fifo: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO || int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return nil, fmt.Errorf("launcher: %s is not the platform's lifecycle fifo", p)
	}
	return os.NewFile(uintptr(fd), "lifecycle"), nil
}
