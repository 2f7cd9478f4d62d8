package proc

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Supervisor starts, reaps and tracks the processes of one sandbox. Create
// it with New and stop it with Shutdown. All methods are safe for
// concurrent use.
//
// A Supervisor must be the only code in the program that waits for child
// processes: its reaper collects every child (including orphans that
// reparent to rayd), so os/exec's Cmd.Wait elsewhere would fail. For the
// same reason at most one Supervisor may be running in a program at a time:
// two would reap (and discard) each other's children, whose processes would
// then never end. Supervisors may follow one another once the previous one
// has been shut down (tests must not run them in parallel).
type Supervisor struct {
	opts        Options
	log         *slog.Logger
	held        atomic.Int64 // bytes held by all rings (OutputBudget accounting)
	maxRetained int

	plat platform // OS-specific state (reaper, /dev/null, privileges)

	mu       sync.Mutex // registry; also held across fork (see Start)
	shutting bool
	waiting  map[int]*Process      // leaders not reaped yet, by pid
	byPid    map[int]*Process      // newest process per pid, live or retained
	live     map[*Process]struct{} // not ended
	ended    []endedEntry          // retained ended processes, oldest first

	quit         chan struct{} // closed to stop the background goroutines
	bg           sync.WaitGroup
	shutdownDone chan struct{}
}

type endedEntry struct {
	p  *Process
	at time.Time
}

// New returns a running Supervisor. Zero option fields take their defaults.
// On Linux it makes rayd a child subreaper (PR_SET_CHILD_SUBREAPER), so that
// orphaned descendants are reparented to it and reaped, and starts the
// reaper; on other systems it returns an error.
func New(opts Options) (*Supervisor, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Supervisor{
		opts:         opts,
		log:          opts.Logger,
		maxRetained:  MaxRetainedEnded,
		waiting:      make(map[int]*Process),
		byPid:        make(map[int]*Process),
		live:         make(map[*Process]struct{}),
		quit:         make(chan struct{}),
		shutdownDone: make(chan struct{}),
	}
	if err := s.plat.init(s); err != nil {
		return nil, err
	}
	s.bg.Add(1)
	go s.janitor()
	return s, nil
}

// Start starts a process described by spec in its own process group.
//
// Errors: ErrShuttingDown, ErrTooManyProcesses; an executable that does not
// exist yields an error matching ErrNotFound and fs.ErrNotExist, one that
// may not be executed fs.ErrPermission, and a missing or non-directory Dir
// an error matching fs.ErrNotExist. Nothing is leaked on failure.
func (s *Supervisor) Start(spec Spec) (*Process, error) {
	p, _, err := s.start(spec, false)
	return p, err
}

// StartSubscribed is Start plus a subscription attached before the process
// can write anything, so its reader sees every byte from seq 1 however
// fast the process writes.
func (s *Supervisor) StartSubscribed(spec Spec) (*Process, *Subscription, error) {
	return s.start(spec, true)
}

func (s *Supervisor) start(spec Spec, subscribe bool) (*Process, *Subscription, error) {
	if spec.Path == "" {
		return nil, nil, newStartError("executable not found", ErrNotFound, fs.ErrNotExist)
	}
	if err := s.admit(); err != nil {
		return nil, nil, err
	}
	argv := spec.Args
	if len(argv) == 0 {
		argv = []string{spec.Path}
	}
	env := spec.Env
	if env == nil {
		env = []string{} // nil would make os.StartProcess inherit rayd's environment
	}
	if spec.Dir != "" {
		if err := checkDir(spec.Dir); err != nil {
			return nil, nil, err
		}
	}
	cio, err := s.openIO(&spec)
	if err != nil {
		return nil, nil, err
	}
	outputs, childFiles, inW, master := cio.outputs, cio.childFiles, cio.inW, cio.master
	closeAll := cio.closeAll

	oomBase, oomKnown := s.oomBaseline()

	// The registry lock is held from before the fork until the pid is
	// registered, and the reaper takes it before looking a pid up: a child
	// that exits immediately cannot have its status discarded. It also
	// serialises the rlimit switching in spawn.
	s.mu.Lock()
	if err := s.admitLocked(); err != nil {
		s.mu.Unlock()
		closeAll()
		return nil, nil, err
	}
	pid, err := s.plat.spawn(s, spec.Path, argv, env, spec.Dir, spec.Identity, childFiles, master != nil)
	if err != nil {
		s.mu.Unlock()
		closeAll()
		return nil, nil, err
	}
	p := newProcess(s, pid, spec, time.Now(), outputs, inW, master)
	p.oomBase, p.oomKnown = oomBase, oomKnown
	if old := s.byPid[pid]; old != nil {
		// The pid was reused while an older process still had it. A retained
		// one is forgotten now; a live one (still draining its output) is
		// evicted when it ends (see processEnded).
		if _, live := s.live[old]; !live {
			s.forgetLocked(old)
			defer old.evict()
		}
	}
	s.waiting[pid] = p
	s.byPid[pid] = p
	s.live[p] = struct{}{}
	s.mu.Unlock()

	// The child has its copies; close the parent's.
	for _, f := range cio.childEnds {
		_ = f.Close()
	}
	var sub *Subscription
	if subscribe {
		// Nothing has been read yet: the subscription starts at seq 1.
		sub, _ = p.Subscribe(0)
	}
	if master != nil {
		go p.readLoop(master, Stdout, ptyReadSize)
	} else if len(outputs) == 2 {
		go p.readLoop(outputs[0], Stdout, readSize)
		go p.readLoop(outputs[1], Stderr, readSize)
	}
	if spec.Timeout > 0 {
		p.mu.Lock()
		if !p.reaped {
			p.timer = time.AfterFunc(spec.Timeout, p.onTimeout)
		}
		p.mu.Unlock()
	}
	s.log.Debug("process started", "pid", pid)
	return p, sub, nil
}

// checkDir checks the working directory dir before the fork: the child
// reports chdir and exec failures with the same errno, so the directory
// is checked first to tell the two apart.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return newStartError("working directory not accessible", fs.ErrPermission)
	case err != nil:
		return newStartError("working directory not found", fs.ErrNotExist)
	case !fi.IsDir():
		return newStartError("working directory is not a directory", fs.ErrNotExist, syscall.ENOTDIR)
	}
	return nil
}

// childIO is a child's descriptors as start opens them.
type childIO struct {
	pipes      []*os.File // every descriptor opened here, closed on failure
	outputs    []*os.File // parent ends read by readLoop
	childFiles []*os.File // the child's fds 0, 1, 2
	childEnds  []*os.File // closed in the parent once the child has them
	inW        *os.File   // stdin pipe, write end
	master     *os.File   // PTY master
}

// closeAll closes every descriptor opened for the child.
func (c *childIO) closeAll() {
	for _, f := range c.pipes {
		_ = f.Close()
	}
}

// openIO opens spec's descriptors: its Files, a PTY (which turns Stdin
// off) or pipes for stdout, stderr and, with Stdin, stdin.
func (s *Supervisor) openIO(spec *Spec) (*childIO, error) {
	c := &childIO{}
	if spec.Files != nil {
		if len(spec.Files) != 3 || slices.Contains(spec.Files, nil) || spec.PTY != nil || spec.Stdin {
			return nil, newStartError("Files needs three descriptors, without Stdin or PTY", fs.ErrInvalid)
		}
		c.childFiles = spec.Files
	} else if spec.PTY != nil {
		spec.Stdin = false
		cols, rows := spec.PTY.size()
		m, slave, err := openPTY(cols, rows, spec.Identity)
		if err != nil {
			return nil, err
		}
		c.pipes = append(c.pipes, m, slave)
		c.master = m
		c.outputs = []*os.File{m}
		c.childFiles = []*os.File{slave, slave, slave}
		c.childEnds = []*os.File{slave}
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		c.pipes = append(c.pipes, outR, outW)
		errR, errW, err := os.Pipe()
		if err != nil {
			c.closeAll()
			return nil, err
		}
		c.pipes = append(c.pipes, errR, errW)
		childStdin := s.plat.devNull
		if spec.Stdin {
			inR, w, err := os.Pipe()
			if err != nil {
				c.closeAll()
				return nil, err
			}
			c.pipes = append(c.pipes, inR, w)
			childStdin, c.inW = inR, w
			c.childEnds = append(c.childEnds, inR)
		}
		c.outputs = []*os.File{outR, errR}
		c.childFiles = []*os.File{childStdin, outW, errW}
		c.childEnds = append(c.childEnds, outW, errW)
	}
	return c, nil
}

func (s *Supervisor) admit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitLocked()
}

func (s *Supervisor) admitLocked() error {
	if s.shutting {
		return ErrShuttingDown
	}
	if len(s.live) >= s.opts.MaxLive {
		return ErrTooManyProcesses
	}
	return nil
}

// Get returns the live or retained-ended process with the given pid, or
// ErrNotFound.
func (s *Supervisor) Get(pid int) (*Process, error) {
	s.mu.Lock()
	evicted := s.expireLocked(time.Now())
	p := s.byPid[pid]
	s.mu.Unlock()
	for _, e := range evicted {
		e.evict()
	}
	if p == nil {
		return nil, ErrNotFound
	}
	return p, nil
}

// List returns the live processes, ordered by pid.
func (s *Supervisor) List() []*Process {
	s.mu.Lock()
	out := make([]*Process, 0, len(s.live))
	for p := range s.live {
		out = append(out, p)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *Process) int { return a.pid - b.pid })
	return out
}

// Live returns the number of live (not yet ended) processes.
func (s *Supervisor) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// reaped delivers the wait status of a reaped pid; statuses of pids that
// are not registered leaders (orphaned descendants) are discarded.
func (s *Supervisor) reaped(pid int, r rawExit) {
	s.mu.Lock()
	p := s.waiting[pid]
	delete(s.waiting, pid)
	s.mu.Unlock()
	if p != nil {
		p.onReaped(r)
	}
}

// processEnded moves p from the live set to the retained set.
func (s *Supervisor) processEnded(p *Process) {
	s.mu.Lock()
	delete(s.live, p)
	var evicted []*Process
	if s.byPid[p.pid] == p {
		s.ended = append(s.ended, endedEntry{p: p, at: time.Now()})
		for len(s.ended) > s.maxRetained {
			evicted = append(evicted, s.ended[0].p)
			s.forgetLocked(s.ended[0].p)
		}
	} else {
		evicted = append(evicted, p) // superseded by a newer process with the same pid
	}
	s.mu.Unlock()
	for _, e := range evicted {
		e.evict()
	}
}

// forgetLocked removes a retained ended process from the registry.
func (s *Supervisor) forgetLocked(p *Process) {
	if s.byPid[p.pid] == p {
		delete(s.byPid, p.pid)
	}
	s.ended = slices.DeleteFunc(s.ended, func(e endedEntry) bool { return e.p == p })
}

// expireLocked forgets the ended processes older than EndedRetention and
// returns them; the caller evicts them after unlocking.
func (s *Supervisor) expireLocked(now time.Time) []*Process {
	var out []*Process
	for len(s.ended) > 0 && now.Sub(s.ended[0].at) >= s.opts.EndedRetention {
		p := s.ended[0].p
		out = append(out, p)
		s.forgetLocked(p)
	}
	return out
}

// janitor expires retained processes and cuts stuck subscribers.
func (s *Supervisor) janitor() {
	defer s.bg.Done()
	interval := min(s.opts.StuckAfter, s.opts.EndedRetention) / 4
	interval = max(10*time.Millisecond, min(interval, time.Second))
	t := time.NewTicker(interval)
	defer t.Stop()
	var procs []*Process
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			s.mu.Lock()
			evicted := s.expireLocked(now)
			procs = procs[:0]
			for p := range s.live {
				procs = append(procs, p)
			}
			for _, e := range s.ended {
				procs = append(procs, e.p)
			}
			s.mu.Unlock()
			for _, p := range evicted {
				p.evict()
			}
			for _, p := range procs {
				p.cutStuck(now)
			}
			clear(procs)
		}
	}
}

// Shutdown stops the supervisor: Start fails with ErrShuttingDown from now
// on, every live process group gets SIGTERM, and the groups still present
// after grace (or once ctx is done, if sooner) get SIGKILL. Shutdown then
// waits for the processes to end and their groups to be gone (reaped), and
// stops the reaper. If ctx is done it waits at most KillGrace after the
// SIGKILL. Descendants that left the process group (setsid, setpgid) are
// not tracked.
//
// Shutdown is idempotent: later calls wait for the first one to finish or
// for their ctx. Retained processes stay available to Get.
func (s *Supervisor) Shutdown(ctx context.Context, grace time.Duration) {
	s.mu.Lock()
	if s.shutting {
		s.mu.Unlock()
		select {
		case <-s.shutdownDone:
		case <-ctx.Done():
		}
		return
	}
	s.shutting = true
	procs := make([]*Process, 0, len(s.live))
	for p := range s.live {
		procs = append(procs, p)
	}
	s.mu.Unlock()

	for _, p := range procs {
		p.signalGroup(syscall.SIGTERM)
	}
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	if !waitGone(procs, graceTimer.C, ctx.Done()) {
		for _, p := range procs {
			// This also reaches groups whose leader has ended but whose
			// members linger (a pgid is not reused while it has members).
			p.noteKill()
			_ = killGroup(p.pid, syscall.SIGKILL)
		}
		if !waitGone(procs, nil, ctx.Done()) {
			limit := time.NewTimer(s.opts.KillGrace)
			waitGone(procs, limit.C, nil)
			limit.Stop()
		}
	}

	close(s.quit)
	s.bg.Wait()
	s.plat.stop()
	close(s.shutdownDone)
	s.log.Debug("supervisor shut down", "processes", len(procs))
}

// waitGone waits until every process has ended and its process group has
// no members left (all reaped), or until timeout or done fires. It reports
// whether everything is gone.
func waitGone(procs []*Process, timeout <-chan time.Time, done <-chan struct{}) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if allGone(procs) {
			return true
		}
		select {
		case <-timeout:
			return allGone(procs)
		case <-done:
			return allGone(procs)
		case <-tick.C:
		}
	}
}

func allGone(procs []*Process) bool {
	for _, p := range procs {
		select {
		case <-p.done:
		default:
			return false
		}
		if !errors.Is(killGroup(p.pid, 0), errGroupGone) {
			return false
		}
	}
	return true
}
