package proc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// newPolicySupervisor returns a Supervisor without the OS parts, for
// exercising the output policy on processes fed by hand.
func newPolicySupervisor(t *testing.T, opts Options) *Supervisor {
	t.Helper()
	if err := opts.fill(); err != nil {
		t.Fatal(err)
	}
	return &Supervisor{
		opts:         opts,
		log:          opts.Logger,
		maxRetained:  MaxRetainedEnded,
		waiting:      make(map[int]*Process),
		byPid:        make(map[int]*Process),
		live:         make(map[*Process]struct{}),
		quit:         make(chan struct{}),
		shutdownDone: make(chan struct{}),
	}
}

func fakeProcess(s *Supervisor, pid int) *Process {
	p := newProcess(s, pid, Spec{}, time.Now(), nil, nil, nil)
	s.mu.Lock()
	s.byPid[pid] = p
	s.live[p] = struct{}{}
	s.mu.Unlock()
	return p
}

// endFake ends a fake process as if its leader exited with code.
func endFake(p *Process, code int) {
	p.mu.Lock()
	p.reaped, p.raw, p.readersLeft = true, rawExit{exited: true, code: code}, 0
	p.mu.Unlock()
	p.finish()
}

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func next(t *testing.T, sub *Subscription) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

func expectEOF(t *testing.T, sub *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ev, err := sub.Next(ctx); err != io.EOF {
		t.Fatalf("Next = %+v, %v; want io.EOF", ev, err)
	}
}

func TestRingWindow(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000})
	p := fakeProcess(s, 10)
	for i := range 10 {
		p.appendOutput(Stdout, fill(300, byte('a'+i)))
	}
	if p.ring.first != 8 || p.ring.next != 11 || p.ring.held != 900 || s.held.Load() != 900 {
		t.Fatalf("first=%d next=%d held=%d acct=%d; want 8, 11, 900, 900", p.ring.first, p.ring.next, p.ring.held, s.held.Load())
	}
	// A chunk larger than the window is still kept on its own.
	p.appendOutput(Stderr, fill(5000, 'z'))
	if p.ring.first != 11 || p.ring.held != 5000 {
		t.Fatalf("after big chunk: first=%d held=%d", p.ring.first, p.ring.held)
	}
	sub, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, sub)
	if ev.Kind != Data || ev.Seq != 11 || ev.Stream != Stderr || len(ev.Data) != 5000 {
		t.Fatalf("got %+v", ev)
	}
}

func TestSubscribeRange(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000})
	p := fakeProcess(s, 10)
	for range 5 {
		p.appendOutput(Stdout, fill(400, 'x'))
	}
	// Retained: seqs 4 and 5; next is 6.
	for from, wantErr := range map[uint64]bool{0: false, 1: true, 3: true, 4: false, 5: false, 6: false, 7: true, 100: true} {
		sub, err := p.Subscribe(from)
		if gotErr := errors.Is(err, ErrOutOfRange); gotErr != wantErr {
			t.Errorf("Subscribe(%d) err = %v, want out of range %v", from, err, wantErr)
		}
		if sub != nil {
			sub.Close()
		}
	}
	sub, _ := p.Subscribe(0)
	if ev := next(t, sub); ev.Seq != 4 {
		t.Fatalf("replay from 0 starts at %d, want 4", ev.Seq)
	}
	sub6, _ := p.Subscribe(6)
	endFake(p, 3)
	ev := next(t, sub6)
	if ev.Kind != End || ev.Seq != 6 || ev.Exit.ExitCode != 3 || ev.Exit.Status != StatusExited || !ev.Exit.Exited {
		t.Fatalf("got %+v, want End seq 6 exit 3", ev)
	}
	expectEOF(t, sub6)
	if ev := next(t, sub); ev.Seq != 5 {
		t.Fatalf("got %+v, want seq 5", ev)
	}
	if ev := next(t, sub); ev.Kind != End {
		t.Fatalf("got %+v, want End", ev)
	}
	expectEOF(t, sub)
	expectEOF(t, sub)
}

func TestLagCut(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000, MaxSubscriberLag: 2000})
	p := fakeProcess(s, 10)
	slow, _ := p.Subscribe(0)
	fast, _ := p.Subscribe(0)
	for i := range 7 {
		p.appendOutput(Stdout, fill(300, byte('0'+i)))
		if ev := next(t, fast); ev.Seq != uint64(i+1) {
			t.Fatalf("fast got seq %d, want %d", ev.Seq, i+1)
		}
	}
	// slow lags 2100 bytes behind the head but only 2100-0 behind fast,
	// which is at the head: everything is still held for it.
	if p.ring.first != 1 || p.ring.held != 2100 || s.held.Load() != 2100 {
		t.Fatalf("first=%d held=%d acct=%d", p.ring.first, p.ring.held, s.held.Load())
	}
	p.appendOutput(Stdout, fill(300, '7')) // slow is 2400-300 = 2100 > 2000 behind fast: cut
	if p.ring.held != 900 || s.held.Load() != 900 {
		t.Fatalf("after cut held=%d acct=%d, want 900", p.ring.held, s.held.Load())
	}
	ev := next(t, slow)
	if ev.Kind != Truncated || ev.Seq != 1 {
		t.Fatalf("slow got %+v, want Truncated at 1", ev)
	}
	expectEOF(t, slow)
	if ev := next(t, fast); ev.Seq != 8 || ev.Data[0] != '7' {
		t.Fatalf("fast got %+v", ev)
	}
}

func TestConsumingReleasesExtras(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000})
	p := fakeProcess(s, 10)
	sub, _ := p.Subscribe(0)
	for range 10 {
		p.appendOutput(Stdout, fill(300, 'x'))
	}
	if s.held.Load() != 3000 {
		t.Fatalf("held %d, want 3000", s.held.Load())
	}
	for i := range 7 {
		next(t, sub)
		if want := int64(3000 - 300*(i+1)); s.held.Load() != want {
			t.Fatalf("after %d Next: held %d, want %d", i+1, s.held.Load(), want)
		}
	}
	next(t, sub)
	if s.held.Load() != 900 {
		t.Fatalf("held %d, want the window (900)", s.held.Load())
	}
	sub.Close()
	expectEOF(t, sub)
}

func TestBudgetCut(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000, MaxSubscriberLag: 1 << 20, OutputBudget: 4000})
	a := fakeProcess(s, 10)
	b := fakeProcess(s, 11)
	older, _ := a.Subscribe(0)
	for range 5 {
		a.appendOutput(Stdout, fill(300, 'a'))
	}
	newer, _ := a.Subscribe(0) // starts at seq 1 as well, but we advance it
	for range 3 {
		next(t, newer)
	}
	for range 5 {
		a.appendOutput(Stdout, fill(300, 'a'))
	}
	// a holds 3000 (10 chunks for older), b fills the budget.
	for range 4 {
		b.appendOutput(Stdout, fill(300, 'b'))
	}
	if got := s.held.Load(); got != 3900 {
		t.Fatalf("held %d, want 3900", got)
	}
	a.appendOutput(Stdout, fill(300, 'a')) // 4200 > 4000: cut the oldest holder of a
	if ev := next(t, older); ev.Kind != Truncated || ev.Seq != 1 {
		t.Fatalf("older got %+v, want Truncated", ev)
	}
	if got := s.held.Load(); got > 4000 {
		t.Fatalf("held %d after cut, want ≤ 4000", got)
	}
	if ev := next(t, newer); ev.Kind != Data || ev.Seq != 4 {
		t.Fatalf("newer got %+v, want seq 4", ev)
	}
}

func TestEvictReleases(t *testing.T) {
	s := newPolicySupervisor(t, Options{RingBytes: 1000})
	p := fakeProcess(s, 10)
	for range 3 {
		p.appendOutput(Stdout, fill(300, 'x'))
	}
	sub, _ := p.Subscribe(2)
	endFake(p, 0)
	if _, err := s.Get(10); err != nil {
		t.Fatalf("retained process: %v", err)
	}
	p.evict()
	if s.held.Load() != 600 {
		t.Fatalf("held %d after evict with a reader at seq 2, want 600", s.held.Load())
	}
	next(t, sub)
	if s.held.Load() != 300 {
		t.Fatalf("held %d, want 300", s.held.Load())
	}
	next(t, sub)
	if ev := next(t, sub); ev.Kind != End {
		t.Fatalf("got %+v, want End", ev)
	}
	if s.held.Load() != 0 {
		t.Fatalf("held %d, want 0", s.held.Load())
	}
}

func TestRetentionCap(t *testing.T) {
	s := newPolicySupervisor(t, Options{})
	s.maxRetained = 2
	var ps []*Process
	for pid := 10; pid < 13; pid++ {
		p := fakeProcess(s, pid)
		p.appendOutput(Stdout, []byte("x"))
		endFake(p, 0)
		ps = append(ps, p)
	}
	if _, err := s.Get(10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest: %v, want ErrNotFound", err)
	}
	for _, pid := range []int{11, 12} {
		if _, err := s.Get(pid); err != nil {
			t.Fatalf("Get(%d): %v", pid, err)
		}
	}
	if s.held.Load() != 2 {
		t.Fatalf("held %d, want 2", s.held.Load())
	}
	if s.Live() != 0 {
		t.Fatalf("Live = %d", s.Live())
	}
}

func TestNextContext(t *testing.T) {
	s := newPolicySupervisor(t, Options{})
	p := fakeProcess(s, 10)
	sub, _ := p.Subscribe(0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// Several goroutines blocked in Next are all woken by Close.
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := sub.Next(context.Background())
			errs <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	sub.Close()
	for range 3 {
		if err := <-errs; err != io.EOF {
			t.Fatalf("err = %v, want io.EOF", err)
		}
	}
}

func TestExitInfo(t *testing.T) {
	tests := []struct {
		raw      rawExit
		timedOut bool
		want     ExitInfo
	}{
		{rawExit{exited: true, code: 0}, false, ExitInfo{ExitCode: 0, Exited: true, Status: StatusExited}},
		{rawExit{exited: true, code: 7}, false, ExitInfo{ExitCode: 7, Exited: true, Status: StatusExited}},
		{rawExit{sig: 9}, false, ExitInfo{ExitCode: 137, Signal: 9, Status: StatusSignaled}},
		{rawExit{sig: 9}, true, ExitInfo{ExitCode: 137, Signal: 9, Status: StatusTimeout, Err: ExitErrDeadlineExceeded}},
		{rawExit{exited: true, code: 143}, true, ExitInfo{ExitCode: 143, Exited: true, Status: StatusTimeout, Err: ExitErrDeadlineExceeded}},
	}
	for _, tc := range tests {
		if got := exitInfo(tc.raw, tc.timedOut); got != tc.want {
			t.Errorf("exitInfo(%+v, %v) = %+v, want %+v", tc.raw, tc.timedOut, got, tc.want)
		}
	}
}

func TestOptionDefaults(t *testing.T) {
	var o Options
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	if o.MaxLive != 256 || o.RingBytes != 1<<20 || o.MaxSubscriberLag != 8<<20 || o.OutputBudget != 128<<20 ||
		o.EndedRetention != 30*time.Second || o.StuckAfter != 30*time.Second || o.KillGrace != 5*time.Second ||
		o.DrainAfterExit != 100*time.Millisecond || o.Rlimits != (Rlimits{Nproc: 512, Nofile: 4096, Core: 0}) || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	bad := Options{KillGrace: -1}
	if err := bad.fill(); err == nil {
		t.Fatal("negative option accepted")
	}
}
