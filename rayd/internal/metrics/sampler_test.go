package metrics

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeProc writes a /proc of the given tasks (pid → stat line) with self
// pointing at pid self.
func fakeProc(t *testing.T, self int, tasks map[int][]byte, meminfo string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, line := range tasks {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "stat"), line, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(strconv.Itoa(self), filepath.Join(dir, "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sys"), 0o755); err != nil { // not a pid
		t.Fatal(err)
	}
	if meminfo != "" {
		if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(meminfo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The scan counts rayd and its descendants only: not its parent, kernel
// threads, other trees, cycles or unreadable entries.
func TestScanSandboxOnly(t *testing.T) {
	t.Parallel()
	tasks := map[int][]byte{
		1:   statLine(1, []byte("init"), 0, 1000, 1000, 0, 0, 1),          // rayd's parent (outside)
		2:   statLine(2, []byte("kthreadd"), 0, 500, 500, 0, 0, 0),        // kernel
		3:   statLine(3, []byte("kworker/0:0"), 2, 500, 500, 0, 0, 0),     // kernel
		10:  statLine(10, []byte("rayd"), 1, 10, 20, 300, 400, 1000),      // rayd: its children's times too
		11:  statLine(11, []byte("sh"), 10, 1, 2, 30, 40, 100),            // child
		12:  statLine(12, []byte("python (x)"), 11, 5, 5, 0, 0, 200),      // grandchild
		13:  statLine(13, []byte("orphan"), 10, 7, 0, 0, 0, 50),           // reparented to rayd
		20:  statLine(20, []byte("other"), 1, 9999, 0, 0, 0, 9999),        // another tree
		21:  statLine(21, []byte("other child"), 20, 9999, 0, 0, 0, 9999), // its child
		30:  statLine(30, []byte("cycle a"), 31, 1, 0, 0, 0, 1),
		31:  statLine(31, []byte("cycle b"), 30, 1, 0, 0, 0, 1),
		40:  []byte("40 (broken"),
		100: statLine(100, []byte("gone parent"), 99, 1, 0, 0, 0, 1),
	}
	dir := fakeProc(t, 10, tasks, "MemTotal: 2048 kB\nMemAvailable: 1024 kB\nCached: 512 kB\n")
	sc := newScanner(dir, true, []string{filepath.Join(dir, "missing"), dir})
	if sc.self != 10 {
		t.Fatalf("self %d", sc.self)
	}
	var r reading
	if err := sc.scan(&r); err != nil {
		t.Fatal(err)
	}
	// rayd, sh, python and the orphan; the processes are those but rayd.
	if r.tasks != 4 || r.procs != 3 || !r.self {
		t.Errorf("tasks %d, processes %d, self %v: want 4, 3, true", r.tasks, r.procs, r.self)
	}
	if want := uint64(10 + 20 + 300 + 400 + 1 + 2 + 30 + 40 + 5 + 5 + 7); r.ticks != want {
		t.Errorf("ticks %d, want %d", r.ticks, want)
	}
	if want := uint64(1000+100+200+50) * uint64(os.Getpagesize()); r.rssBytes != want {
		t.Errorf("rss %d, want %d", r.rssBytes, want)
	}
	if !r.memOK || r.mem.total != 2048<<10 || r.mem.used() != 1024<<10 || r.mem.cached != 512<<10 {
		t.Errorf("meminfo %+v, %v", r.mem, r.memOK)
	}
	if r.disk.total == 0 || r.disk.used > r.disk.total {
		t.Errorf("disk %+v (falls back to the second path)", r.disk)
	}
	// The same scanner again (reused buffers) gives the same figures.
	var r2 reading
	if err := sc.scan(&r2); err != nil || r2.tasks != r.tasks || r2.ticks != r.ticks || r2.rssBytes != r.rssBytes {
		t.Errorf("second scan %+v, %v", r2, err)
	}
	if err := newScanner(filepath.Join(dir, "none"), false, nil).scan(&r); err == nil {
		t.Error("a missing /proc scanned")
	}
}

// When rayd is PID 1 everything but the kernel's threads is the sandbox.
func TestScanAsPID1(t *testing.T) {
	t.Parallel()
	tasks := map[int][]byte{
		1: statLine(1, []byte("rayd"), 0, 1, 1, 0, 0, 1),
		2: statLine(2, []byte("kthreadd"), 0, 500, 500, 0, 0, 0),
		3: statLine(3, []byte("ksoftirqd/0"), 2, 500, 500, 0, 0, 0),
		7: statLine(7, []byte("bash"), 1, 1, 1, 0, 0, 1),
	}
	var r reading
	if err := newScanner(fakeProc(t, 1, tasks, ""), false, nil).scan(&r); err != nil {
		t.Fatal(err)
	}
	if r.tasks != 2 || r.procs != 1 || !r.self || r.ticks != 4 || r.memOK {
		t.Fatalf("%+v", r)
	}
}

func TestCPUPercent(t *testing.T) {
	t.Parallel()
	at := func(mono time.Duration, ticks uint64) reading {
		return reading{at: stamp{mono: mono}, ticks: ticks}
	}
	for _, c := range []struct {
		base, cur reading
		cpus      int
		want      float64
	}{
		{at(0, 0), at(time.Second, 100), 1, 100},
		{at(0, 0), at(time.Second, 100), 2, 50},
		{at(0, 0), at(5*time.Second, 250), 2, 25},
		{at(0, 0), at(time.Second, 1000), 2, 100}, // clipped
		{at(0, 100), at(time.Second, 50), 2, 0},   // the sum dropped
		{at(time.Second, 0), at(time.Second, 50), 2, 0},
		{at(2*time.Second, 0), at(time.Second, 50), 2, 0},
	} {
		if got := cpuPercent(c.base, c.cur, c.cpus); got != c.want {
			t.Errorf("cpuPercent(%+v, %+v, %d) = %v, want %v", c.base, c.cur, c.cpus, got, c.want)
		}
	}
}

func TestSpansFreeze(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	st := func(mono, wall time.Duration) stamp { return stamp{mono: mono, wall: t0.Add(wall)} }
	const iv = 5 * time.Second
	for _, c := range []struct {
		b    stamp
		want bool
	}{
		{st(5*time.Second, 5*time.Second), false},
		{st(9*time.Second, 9*time.Second+500*time.Millisecond), false}, // late tick, small drift
		{st(11*time.Second, 11*time.Second), true},                     // frozen: no tick for 11 s
		{st(5*time.Second, time.Hour), true},                           // a restore, then the clock was set
		{st(5*time.Second, 2*time.Second), true},                       // the clock went back
		{st(-time.Second, 0), true},
	} {
		if got := spansFreeze(st(0, 0), c.b, iv); got != c.want {
			t.Errorf("spansFreeze(0, %+v) = %v", c.b, got)
		}
	}
}

// fakeSandbox drives a Sampler with readings the test chooses.
type fakeSandbox struct {
	mu    sync.Mutex
	at    stamp
	ticks uint64
	reads int
}

func (f *fakeSandbox) now() stamp {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

func (f *fakeSandbox) read() reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return reading{at: f.at, ticks: f.ticks, tasks: 3, procs: 2, self: true, rssBytes: 5 << 20, disk: diskUsage{used: 1, total: 2}}
}

// advance moves both clocks by d (the wall one by wall) and the CPU time
// by ticks.
func (f *fakeSandbox) advance(d, wall time.Duration, ticks uint64) {
	f.mu.Lock()
	f.at.mono += d
	f.at.wall = f.at.wall.Add(wall)
	f.ticks += ticks
	f.mu.Unlock()
}

func newFakeSampler(t *testing.T, opts Options) (*Sampler, *fakeSandbox) {
	t.Helper()
	f := &fakeSandbox{at: stamp{wall: time.Unix(1_700_000_000, 0)}}
	s := New(opts)
	s.cpus = 1
	s.now, s.read = f.now, f.read
	return s, f
}

// A background step spanning a freeze does not average CPU over it: the
// sample is measured over a fresh window after the resume.
func TestStepAcrossFreeze(t *testing.T) {
	t.Parallel()
	s, f := newFakeSampler(t, Options{MemoryLimit: 1 << 30})
	prev := f.read()
	f.advance(5*time.Second, 5*time.Second, 250) // 50 % of one CPU
	noSleep := func(time.Duration) bool { return true }
	prev, _ = s.step(prev, noSleep)

	// Frozen for an hour (both clocks went on, no tick came): 10 ticks
	// were spent before the freeze; after it, 5 ticks in the window.
	f.advance(time.Hour, time.Hour, 10)
	sleep := func(d time.Duration) bool {
		if d != window {
			t.Errorf("window %v", d)
		}
		f.advance(d, d, 5)
		return true
	}
	prev, _ = s.step(prev, sleep)

	// A restored microVM: monotonic time went on 5 s, the wall clock was
	// then set a day ahead, and a burst of ticks came with the restore.
	f.advance(5*time.Second, 24*time.Hour, 400)
	s.step(prev, sleep)

	got, oldest := s.History(0, 0, 0)
	if len(got) != 3 {
		t.Fatalf("%d samples", len(got))
	}
	for i, want := range []float64{50, 50, 50} {
		if got[i].CPUPercent != want {
			t.Errorf("sample %d: CPU %v %%, want %v", i, got[i].CPUPercent, want)
		}
	}
	if oldest != got[0].UnixMilli || got[1].UnixMilli-got[0].UnixMilli != (time.Hour+window).Milliseconds() {
		t.Errorf("times %d, %d (oldest %d)", got[0].UnixMilli, got[1].UnixMilli, oldest)
	}
	smp := got[0]
	if smp.MemTotal != 1<<30 || smp.MemUsed != 5<<20 || smp.MemCache != 0 || smp.Tasks != 3 || smp.Processes != 2 || smp.CPUCount != 1 || smp.DiskTotal != 2 {
		t.Errorf("sample %+v", smp)
	}

	// Stopped during the window: no sample.
	f.advance(time.Hour, time.Hour, 0)
	if _, ok := s.step(prev, func(time.Duration) bool { return false }); ok {
		t.Error("step went on after stop")
	}
	if got, _ := s.History(0, 0, 0); len(got) != 3 {
		t.Errorf("%d samples after a stopped step", len(got))
	}
}

// History filters by time, thins evenly and keeps ascending order, also
// when the wall clock went back.
func TestHistory(t *testing.T) {
	t.Parallel()
	s, _ := newFakeSampler(t, Options{Capacity: 10})
	if got, oldest := s.History(0, 0, 0); len(got) != 0 || oldest != 0 {
		t.Fatalf("empty: %v, %d", got, oldest)
	}
	for i := range 15 { // 5 fall out of the ring
		s.ring.push(Sample{UnixMilli: int64(1000 * (i + 1))})
	}
	times := func(xs []Sample) []int64 {
		var out []int64
		for _, x := range xs {
			out = append(out, x.UnixMilli)
		}
		return out
	}
	check := func(start, end int64, max int, want ...int64) {
		t.Helper()
		got, oldest := s.History(start, end, max)
		if oldest != 6000 {
			t.Errorf("oldest %d", oldest)
		}
		if g := times(got); !equal(g, want) {
			t.Errorf("History(%d, %d, %d) = %v, want %v", start, end, max, g, want)
		}
	}
	check(0, 0, 0, 6000, 7000, 8000, 9000, 10000, 11000, 12000, 13000, 14000, 15000)
	check(8000, 0, 0, 8000, 9000, 10000, 11000, 12000, 13000, 14000, 15000)
	check(0, 8500, 0, 6000, 7000, 8000)
	check(7000, 9000, 0, 7000, 8000, 9000)
	check(9000, 9000, 0, 9000)
	check(20000, 0, 0)
	check(1, 5000, 0)
	check(0, 0, 2, 6000, 15000)
	check(0, 0, 4, 6000, 9000, 12000, 15000)
	check(0, 0, 1, 15000)
	check(0, 0, 10, 6000, 7000, 8000, 9000, 10000, 11000, 12000, 13000, 14000, 15000)
	check(0, 0, 100, 6000, 7000, 8000, 9000, 10000, 11000, 12000, 13000, 14000, 15000)
	check(7000, 12000, 3, 7000, 10000, 12000)

	// The wall clock went back to 12.5 s: the samples after it go.
	s.ring.push(Sample{UnixMilli: 12500})
	check(0, 0, 0, 6000, 7000, 8000, 9000, 10000, 11000, 12000, 12500)
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every thinning keeps the first and the last, in order, without repeats.
func TestDownsample(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 40; n++ {
		xs := make([]Sample, n)
		for i := range xs {
			xs[i].UnixMilli = int64(i)
		}
		for m := 1; m <= n+1; m++ {
			got := downsample(xs, m)
			if len(got) != min(m, n) || got[len(got)-1].UnixMilli != int64(n-1) || (m > 1 && got[0].UnixMilli != 0) {
				t.Fatalf("downsample(%d, %d) = %v", n, m, got)
			}
			for i := 1; i < len(got); i++ {
				if got[i].UnixMilli <= got[i-1].UnixMilli {
					t.Fatalf("downsample(%d, %d) = %v", n, m, got)
				}
			}
		}
	}
}

// Current measures against the background's latest reading over at least
// the window, or over a fresh window without one.
func TestCurrent(t *testing.T) {
	t.Parallel()
	s, f := newFakeSampler(t, Options{})
	// No reading yet: a fresh one, then the window (the fake clock does
	// not move by itself, so the test moves it while Current waits).
	done := make(chan Sample)
	go func() {
		smp, err := s.Current(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- smp
	}()
	waitReads(t, f, 1)
	f.advance(window, window, 2) // 20 % of one CPU
	var smp Sample
	select {
	case smp = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Current did not return")
	}
	if smp.CPUPercent != 20 {
		t.Errorf("first Current: %v %%", smp.CPUPercent)
	}

	// A background reading 2 s old: measured against it, without waiting.
	s.setLast(f.read())
	f.advance(2*time.Second, 2*time.Second, 100)
	if smp, err := s.Current(context.Background()); err != nil || smp.CPUPercent != 50 {
		t.Errorf("against the background reading: %v, %v", smp.CPUPercent, err)
	}
	// One across a freeze is not used.
	f.advance(time.Hour, time.Hour, 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Current(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled while waiting: %v", err)
	}
}

func waitReads(t *testing.T, f *fakeSandbox, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		r := f.reads
		f.mu.Unlock()
		if r >= n {
			return
		}
	}
	t.Fatalf("fewer than %d readings", n)
}

// Processes counts the processes the scan saw (all of them but rayd), not
// the supervised ones; only a reading that did not see rayd (/proc could
// not be read) falls back to Options.Processes.
func TestSampleProcesses(t *testing.T) {
	t.Parallel()
	s := New(Options{Processes: func() int { return 1 }})
	if smp := s.sample(reading{}, reading{tasks: 4, procs: 3, self: true}); smp.Processes != 3 || smp.Tasks != 4 {
		t.Errorf("a scan that saw rayd: %+v", smp)
	}
	if smp := s.sample(reading{}, reading{tasks: 1, self: true}); smp.Processes != 0 || smp.Tasks != 1 {
		t.Errorf("rayd alone: %+v", smp)
	}
	if smp := s.sample(reading{}, reading{}); smp.Processes != 1 || smp.Tasks != 0 {
		t.Errorf("no scan: %+v", smp)
	}
}

// The real thing: Start samples in the background until Stop, which
// leaves no goroutine behind; the figures describe this process, whose
// children (two sleeps) are its processes.
func TestSamplerLive(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 2 {
		sleep := exec.Command("sleep", "30")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	}
	s := New(Options{Interval: 20 * time.Millisecond, Processes: func() int { return 7 }, DiskPath: t.TempDir()})
	s.Stop() // before Start: nothing to stop
	s = New(Options{Interval: 20 * time.Millisecond, Processes: func() int { return 7 }, DiskPath: t.TempDir()})
	s.Start()
	s.Start()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := s.History(0, 0, 0); len(got) >= 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no background samples")
		}
	}
	// Burn CPU for a while: Current sees it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	smp, err := s.Current(context.Background())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if smp.CPUPercent <= 1 || smp.CPUPercent > 100 {
		t.Errorf("CPU %v %% while a goroutine spins", smp.CPUPercent)
	}
	if smp.CPUCount != uint32(runtime.NumCPU()) || smp.Processes != 2 || smp.Tasks != 3 ||
		smp.MemTotal == 0 || smp.MemUsed == 0 || smp.MemUsed > smp.MemTotal || smp.DiskTotal == 0 || smp.DiskUsed > smp.DiskTotal {
		t.Errorf("sample %+v", smp)
	}
	if d := time.Since(time.UnixMilli(smp.UnixMilli)); d < 0 || d > time.Minute {
		t.Errorf("timestamp %d is %v ago", smp.UnixMilli, d)
	}
	s.Stop()
	s.Stop()  // (no sampling after Stop: TestScheduleOnFakeClock)
	s.Start() // after Stop: nothing
	for end := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines, %d before", g, before)
	}

	// With the platform's limit: the limit and the processes' resident
	// sets, no cache.
	s = New(Options{MemoryLimit: 1 << 40})
	smp, err = s.Current(context.Background())
	if err != nil || smp.MemTotal != 1<<40 || smp.MemUsed == 0 || smp.MemCache != 0 {
		t.Errorf("with a limit: %+v, %v", smp, err)
	}
}

// BenchmarkScan is the cost of one reading of the sandbox (the background
// takes one every 5 s); tasks/op is how many processes it read.
func BenchmarkScan(b *testing.B) {
	s := New(Options{})
	var r reading
	for b.Loop() {
		r = s.scan()
	}
	b.ReportMetric(float64(r.tasks), "tasks/op")
	b.ReportMetric(float64(len(s.sc.tasks)), "procs/op")
}
