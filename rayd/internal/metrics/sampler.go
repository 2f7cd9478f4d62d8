package metrics

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultInterval = 5 * time.Second
	DefaultCapacity = 5760 // 8 h at 5 s
	// DefaultHome is the file system the disk figures describe; / when it
	// does not exist.
	DefaultHome = "/home/user"

	// window is the shortest span CPU % is measured over.
	window = 100 * time.Millisecond
	// clockSlack is how far the wall clock may drift from the monotonic
	// one between two readings before they are taken to span a freeze.
	clockSlack = time.Second
)

// Options configures a Sampler. Zero fields take the defaults.
type Options struct {
	// MemoryLimit is the sandbox's memory limit in bytes as the platform
	// set it; 0: unknown (the kernel's memory is the sandbox's).
	MemoryLimit uint64
	// Processes counts the processes and PTYs rayd supervises: the
	// Processes figure when /proc cannot be read (a lower bound then, as
	// their descendants and orphans are not among them); nil: 0.
	Processes func() int
	// Interval between background samples (5 s) and Capacity of the ring
	// (5760).
	Interval time.Duration
	Capacity int
	// DiskPath is the file system measured (DefaultHome, falling back to
	// /).
	DiskPath string
	Logger   *slog.Logger // nil: discard
}

// Sample is one measurement of the sandbox.
type Sample struct {
	UnixMilli  int64   // wall clock time of the reading
	CPUPercent float64 // 0..100 of CPUCount CPUs
	CPUCount   uint32
	MemUsed    uint64
	MemTotal   uint64
	MemCache   uint64
	DiskUsed   uint64
	DiskTotal  uint64
	Processes  uint32 // processes in the sandbox other than rayd (see the package doc)
	Tasks      uint32 // processes in the sandbox, rayd included
}

// stamp is when a reading was taken.
type stamp struct {
	mono time.Duration // monotonic time since the sampler's epoch
	wall time.Time     // wall clock (no monotonic reading)
}

// Sampler measures the sandbox on demand and in the background. Its
// methods are safe for concurrent use.
type Sampler struct {
	opts  Options
	cpus  int
	log   *slog.Logger
	epoch time.Time

	// Replaced by tests.
	now  func() stamp
	read func() reading

	scanMu   sync.Mutex
	sc       *scanner
	scanWarn bool // a failed scan was logged (under scanMu)

	mu       sync.Mutex
	last     reading // the background's latest reading
	haveLast bool
	ring     ring

	runMu   sync.Mutex
	started bool
	stopped bool
	quit    chan struct{}
	done    chan struct{}
}

// New returns a Sampler; Start begins the background sampling.
func New(opts Options) *Sampler {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	disk := []string{opts.DiskPath, "/"}
	if opts.DiskPath == "" {
		disk[0] = DefaultHome
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sampler{
		opts:  opts,
		cpus:  max(runtime.NumCPU(), 1),
		log:   opts.Logger,
		epoch: time.Now(),
		sc:    newScanner("/proc", opts.MemoryLimit == 0, disk),
		ring:  ring{capacity: opts.Capacity},
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.now = func() stamp {
		t := time.Now()
		return stamp{mono: t.Sub(s.epoch), wall: t.Round(0)}
	}
	s.read = s.scan
	return s
}

// Start begins sampling every Interval in the background, until Stop. It
// does nothing after Stop or a previous Start.
func (s *Sampler) Start() {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.started = true
	go s.loop()
}

// Stop ends the background sampling and waits for it. The samples taken
// stay available. Stop is idempotent.
func (s *Sampler) Stop() {
	s.runMu.Lock()
	started := s.started
	if !s.stopped {
		s.stopped = true
		close(s.quit)
	}
	s.runMu.Unlock()
	if started {
		<-s.done
	}
}

func (s *Sampler) loop() {
	defer close(s.done)
	prev := s.read()
	s.setLast(prev)
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		next, ok := s.step(prev, s.sleepQuit)
		if !ok {
			return
		}
		prev = next
	}
}

// step takes one background sample against prev and returns its reading;
// false when the sampler stopped meanwhile. A reading spanning a freeze
// is only a new baseline: the sample is measured over a fresh window.
func (s *Sampler) step(prev reading, sleep func(time.Duration) bool) (reading, bool) {
	cur := s.read()
	if spansFreeze(prev.at, cur.at, s.opts.Interval) {
		prev = cur
		s.setLast(prev)
		if !sleep(window) {
			return cur, false
		}
		cur = s.read()
	}
	smp := s.sample(prev, cur)
	s.mu.Lock()
	s.ring.push(smp)
	s.last, s.haveLast = cur, true
	s.mu.Unlock()
	return cur, true
}

func (s *Sampler) setLast(r reading) {
	s.mu.Lock()
	s.last, s.haveLast = r, true
	s.mu.Unlock()
}

// sleepQuit sleeps for d unless the sampler stops first.
func (s *Sampler) sleepQuit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.quit:
		return false
	}
}

// Current takes a fresh sample. Its CPU % is measured since the
// background's latest reading, over at least 100 ms, or over a fresh 100
// ms window when there is no usable reading. It returns ctx's error if
// ctx ends while it waits.
func (s *Sampler) Current(ctx context.Context) (Sample, error) {
	s.mu.Lock()
	base, ok := s.last, s.haveLast
	s.mu.Unlock()
	if !ok || spansFreeze(base.at, s.now(), s.opts.Interval) {
		base = s.read()
	}
	if wait := window - (s.now().mono - base.at.mono); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Sample{}, ctx.Err()
		}
	}
	return s.sample(base, s.read()), nil
}

// History returns the samples held whose time lies in [start, end] (0: no
// bound), ascending, evenly thinned to at most maxPoints (0: all; the
// first and last are kept), and the time of the oldest sample held (0:
// none). The caller validates the bounds.
func (s *Sampler) History(start, end int64, maxPoints int) ([]Sample, int64) {
	s.mu.Lock()
	out := s.ring.between(start, end)
	oldest := s.ring.oldest()
	s.mu.Unlock()
	return downsample(out, maxPoints), oldest
}

// scan takes a reading of the sandbox.
func (s *Sampler) scan() reading {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	var r reading
	err := s.sc.scan(&r)
	r.at = s.now()
	if err != nil && !s.scanWarn {
		s.scanWarn = true
		s.log.Warn("metrics: cannot read /proc: CPU, memory and task figures are 0", "err", err)
	}
	return r
}

// sample turns the reading cur, with base for the CPU %, into a Sample.
func (s *Sampler) sample(base, cur reading) Sample {
	smp := Sample{
		UnixMilli:  cur.at.wall.UnixMilli(),
		CPUPercent: cpuPercent(base, cur, s.cpus),
		CPUCount:   uint32(min(s.cpus, math.MaxUint32)),
		DiskUsed:   cur.disk.used,
		DiskTotal:  cur.disk.total,
		Tasks:      uint32(min(cur.tasks, math.MaxUint32)),
		Processes:  uint32(min(cur.procs, math.MaxUint32)),
	}
	if lim := s.opts.MemoryLimit; lim != 0 {
		smp.MemTotal = lim
		smp.MemUsed = min(cur.rssBytes, lim)
	} else if cur.memOK {
		smp.MemTotal = cur.mem.total
		smp.MemUsed = cur.mem.used()
		smp.MemCache = cur.mem.cached
	}
	if !cur.self && s.opts.Processes != nil {
		smp.Processes = uint32(min(max(s.opts.Processes(), 0), math.MaxUint32))
	}
	return smp
}

// cpuPercent is the sandbox's CPU use between two readings, in percent of
// cpus CPUs, clipped to 0..100.
func cpuPercent(base, cur reading, cpus int) float64 {
	elapsed := cur.at.mono - base.at.mono
	if elapsed <= 0 || cur.ticks <= base.ticks || cpus <= 0 {
		return 0
	}
	busy := float64(cur.ticks-base.ticks) / clockTicks
	pct := busy / elapsed.Seconds() / float64(cpus) * 100
	return min(pct, 100)
}

// spansFreeze reports whether the span from a to b cannot be a plain
// interval of a running sandbox: monotonic time went back or passed more
// than two intervals (the sandbox was frozen: no tick came), or the wall
// clock moved more than clockSlack apart from the monotonic clock (a
// microVM restored from a snapshot, whose clock was then set).
func spansFreeze(a, b stamp, interval time.Duration) bool {
	mono := b.mono - a.mono
	if mono < 0 || mono > 2*interval {
		return true
	}
	drift := b.wall.Sub(a.wall) - mono
	return drift > clockSlack || drift < -clockSlack
}
