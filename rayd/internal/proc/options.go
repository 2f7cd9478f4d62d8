package proc

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

// Default option values, applied by New to zero fields.
const (
	DefaultMaxLive          = 256
	DefaultMaxSubscribers   = 8
	DefaultRingBytes        = 1 << 20
	DefaultMaxSubscriberLag = 8 << 20
	DefaultOutputBudget     = 128 << 20
	DefaultEndedRetention   = 30 * time.Second
	DefaultStuckAfter       = 30 * time.Second
	DefaultKillGrace        = 5 * time.Second
	DefaultDrainAfterExit   = 100 * time.Millisecond
	DefaultNproc            = 512
	DefaultNofile           = 4096

	// MaxRetainedEnded is the number of ended processes kept connectable;
	// beyond it the oldest is evicted early.
	MaxRetainedEnded = 256

	readSize    = 64 << 10 // bytes read from a pipe at a time (one chunk at most)
	ptyReadSize = 16 << 10 // bytes read from a PTY master at a time

	// DefaultPTYCols and DefaultPTYRows are the window size of a PTY whose
	// PTYConfig leaves them zero.
	DefaultPTYCols = 80
	DefaultPTYRows = 24
)

// Options configures a [Supervisor]. Zero fields take the defaults shown.
type Options struct {
	MaxLive          int           // 256: live processes; Start beyond → ErrTooManyProcesses
	RingBytes        int           // 1 MiB replay ring per process
	MaxSubscribers   int           // 8: subscriptions following one process at once; Subscribe beyond → ErrTooManySubscribers
	MaxSubscriberLag int           // 8 MiB: how far the fastest subscriber may lag behind the head before the readers pause, and any other behind the fastest before it is cut
	OutputBudget     int64         // 128 MiB: sandbox-wide bytes held by all rings and lagging subscribers
	EndedRetention   time.Duration // 30 s: ended processes stay connectable this long (at most 256 of them)
	StuckAfter       time.Duration // 30 s: a subscriber with pending data that consumes nothing this long is cut
	KillGrace        time.Duration // 5 s between SIGTERM and SIGKILL on timeout
	DrainAfterExit   time.Duration // 100 ms: after the leader exits, read the pipes until EOF or this long without data
	Rlimits          Rlimits       // {Nproc 512, Nofile 4096, Core 0}
	Logger           *slog.Logger  // nil: discard
	// OOMKills reads the count of the sandbox's OOM kills (false: it
	// could not be read); it makes a leader the OOM killer ended end with
	// Status "oom_killed" (see oom.go). Nil: no process is ever reported
	// oom_killed.
	OOMKills func() (count uint64, ok bool)
}

// Rlimits are the resource limits every child starts with. When rayd holds
// CAP_SYS_RESOURCE both the soft and the hard limit are set to the value;
// otherwise only the soft limit is lowered (to at most the current hard
// limit), since rayd could not raise its own hard limit back. A root rayd
// without CAP_SYS_RESOURCE instead lowers its own CORE and NOFILE hard
// limits once at start (and NPROC, outside a user namespace), so those
// still bind children exactly.
type Rlimits struct {
	Nproc  uint64 // RLIMIT_NPROC; 0 means the default, 512
	Nofile uint64 // RLIMIT_NOFILE; 0 means the default, 4096
	Core   uint64 // RLIMIT_CORE; the default 0 disables core dumps
}

func (o *Options) fill() error {
	if o.MaxLive < 0 || o.MaxSubscribers < 0 || o.RingBytes < 0 || o.MaxSubscriberLag < 0 || o.OutputBudget < 0 ||
		o.EndedRetention < 0 || o.StuckAfter < 0 || o.KillGrace < 0 || o.DrainAfterExit < 0 {
		return errors.New("proc: negative option value")
	}
	if o.MaxLive == 0 {
		o.MaxLive = DefaultMaxLive
	}
	if o.MaxSubscribers == 0 {
		o.MaxSubscribers = DefaultMaxSubscribers
	}
	if o.RingBytes == 0 {
		o.RingBytes = DefaultRingBytes
	}
	if o.MaxSubscriberLag == 0 {
		o.MaxSubscriberLag = DefaultMaxSubscriberLag
	}
	if o.OutputBudget == 0 {
		o.OutputBudget = DefaultOutputBudget
	}
	if o.EndedRetention == 0 {
		o.EndedRetention = DefaultEndedRetention
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = DefaultStuckAfter
	}
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.DrainAfterExit == 0 {
		o.DrainAfterExit = DefaultDrainAfterExit
	}
	if o.Rlimits.Nproc == 0 {
		o.Rlimits.Nproc = DefaultNproc
	}
	if o.Rlimits.Nofile == 0 {
		o.Rlimits.Nofile = DefaultNofile
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Spec describes a command to start.
type Spec struct {
	// Path is the executable. It is used as given: resolve it with LookPath
	// against the child's PATH first if needed. A relative Path is resolved
	// by the kernel relative to Dir.
	Path string
	// Args is the complete argv; Args[0] is argv[0]. Empty means {Path}.
	Args []string
	// Env is the complete environment of the child. Nil means an empty
	// environment (rayd's own environment is never inherited).
	Env []string
	// Dir is the working directory; "" keeps rayd's.
	Dir string
	// Identity is the account to run as; nil runs as rayd's own identity
	// without any switch. Groups becomes the complete supplementary group
	// list (an empty list clears rayd's groups).
	Identity *identity.Identity
	// Stdin selects a pipe fed by WriteStdin/CloseStdin; when false the
	// child's stdin is /dev/null. Ignored with PTY.
	Stdin bool
	// PTY, when set, gives the child a new pseudo-terminal as stdin, stdout,
	// stderr and controlling terminal (the child starts a new session)
	// instead of pipes. Its output is one Stdout stream; input goes through
	// Process.WriteInput and the window size through Process.Resize.
	PTY *PTYConfig
	// Files, when set, are the child's descriptors 0, 1 and 2 exactly as
	// given (three, none nil: the caller keeps and closes its own copies
	// once Start returns), instead of pipes or a PTY: nothing of the
	// child's output passes through rayd, and its events are its End
	// only. Stdin and PTY must not be set with it. rayd's sudo gives the
	// calling program's own terminal or pipes this way.
	Files []*os.File
	// Timeout, when non-zero, sends SIGTERM to the process group when it
	// expires and SIGKILL Options.KillGrace later if the leader is still
	// alive; the process then ends with Status "timeout".
	Timeout time.Duration
	// Tag is an opaque label for the caller.
	Tag string
	// Config is opaque to this package and returned by Process.Spec (the
	// service keeps its request there).
	Config any
}
