package deadline

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/runpayload"
)

// fakeClock is a manual clock: time moves only in Advance, which runs the
// timers that fall due, in order, in the calling goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool
}

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock by d, firing due timers at their own instants.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.done })
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

type expiries struct {
	mu  sync.Mutex
	got []Action
}

func (e *expiries) record(a Action) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, a)
}

func (e *expiries) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func newManager(t *testing.T) (*Manager, *fakeClock, *expiries) {
	t.Helper()
	c := newClock()
	e := &expiries{}
	return New(Options{Clock: c, OnExpire: e.record}), c, e
}

func policy(timeout, capD time.Duration, a Action) Policy {
	return Policy{Timeout: timeout, Cap: capD, Action: a}
}

func remaining(m *Manager, c *fakeClock) time.Duration { return m.State().Deadline.Sub(c.Now()) }

func TestUnmanaged(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	if st := m.State(); st != (State{Phase: PhaseUnmanaged}) {
		t.Fatalf("state %+v", st)
	}
	if _, err := m.SetTimeout(time.Minute, ModeExact); !errors.Is(err, ErrUnmanaged) {
		t.Fatalf("SetTimeout: %v", err)
	}
	m.Pause()
	c.Advance(time.Hour)
	m.Resume()
	if m.Holds() || e.count() != 0 {
		t.Fatal("an unmanaged sandbox expired")
	}
}

func TestKillAtTheDeadline(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(policy(time.Minute, 10*time.Minute, ActionKill))
	if st := m.State(); st.Phase != PhaseActive || st.Timeout != time.Minute || st.Deadline.Sub(c.Now()) != time.Minute || st.Cap.Sub(c.Now()) != 10*time.Minute || st.Action != ActionKill {
		t.Fatalf("state %+v", st)
	}
	c.Advance(time.Minute - time.Millisecond)
	if e.count() != 0 || m.Holds() {
		t.Fatal("expired early")
	}
	c.Advance(time.Millisecond)
	if e.count() != 1 || e.got[0] != ActionKill || m.Phase() != PhaseExpired || !m.Holds() {
		t.Fatalf("after the deadline: %v, phase %v", e.got, m.Phase())
	}
	_, err := m.SetTimeout(time.Minute, ModeAtLeast)
	if !errors.Is(err, ErrKilled) || !errors.Is(err, ErrExpired) {
		t.Fatalf("SetTimeout after a kill: %v", err)
	}
	c.Advance(time.Hour)
	m.Pause()
	m.Resume()
	c.Advance(time.Hour)
	if e.count() != 1 || m.Phase() != PhaseExpired {
		t.Fatalf("kill mode revived: %d expiries, %v", e.count(), m.Phase())
	}
}

// The time between Pause and Resume is not running time.
func TestSuspendedTimeDoesNotCount(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(policy(time.Minute, 10*time.Minute, ActionKill))
	c.Advance(20 * time.Second)
	m.Pause()
	m.Pause() // repeated: no-op
	c.Advance(5 * time.Hour)
	if e.count() != 0 {
		t.Fatal("expired while paused")
	}
	// While paused the deadline moves with the wall clock.
	if r := remaining(m, c); r != 40*time.Second {
		t.Fatalf("remaining while paused %v", r)
	}
	if capLeft := m.State().Cap.Sub(c.Now()); capLeft != 10*time.Minute-20*time.Second {
		t.Fatalf("cap while paused %v", capLeft)
	}
	m.Resume()
	m.Resume() // repeated: no-op
	c.Advance(39 * time.Second)
	if e.count() != 0 {
		t.Fatal("expired early after resume")
	}
	c.Advance(time.Second)
	if e.count() != 1 {
		t.Fatal("did not expire after 60 s of running time")
	}
}

func TestSetTimeoutModes(t *testing.T) {
	t.Parallel()
	m, c, _ := newManager(t)
	m.Start(policy(time.Minute, 10*time.Minute, ActionKill))
	c.Advance(10 * time.Second) // 50 s left

	st, err := m.SetTimeout(10*time.Second, ModeAtLeast) // 50 > 10: unchanged
	if err != nil || st.Deadline.Sub(c.Now()) != 50*time.Second || st.Extensions != 0 || st.Timeout != time.Minute {
		t.Fatalf("AT_LEAST shorter: %+v %v", st, err)
	}
	st, err = m.SetTimeout(2*time.Minute, ModeAtLeast)
	if err != nil || st.Deadline.Sub(c.Now()) != 2*time.Minute || st.Extensions != 1 || st.Timeout != 2*time.Minute {
		t.Fatalf("AT_LEAST longer: %+v %v", st, err)
	}
	st, err = m.SetTimeout(5*time.Second, ModeExact) // may shorten
	if err != nil || st.Deadline.Sub(c.Now()) != 5*time.Second || st.Extensions != 1 || st.Timeout != 5*time.Second {
		t.Fatalf("EXACT shorter: %+v %v", st, err)
	}
	st, err = m.SetTimeout(6*time.Second, ModeExact)
	if err != nil || st.Extensions != 2 {
		t.Fatalf("EXACT longer: %+v %v", st, err)
	}
	if st.Phase != PhaseActive {
		t.Fatalf("phase %v", st.Phase)
	}
	for _, bad := range []struct {
		d    time.Duration
		mode Mode
	}{{0, ModeExact}, {-time.Second, ModeAtLeast}, {time.Second, 0}, {time.Second, 7}} {
		if _, err := m.SetTimeout(bad.d, bad.mode); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetTimeout(%v, %v): %v", bad.d, bad.mode, err)
		}
	}
}

// The cap is running time from Start: a SetTimeout reaching past it fails
// and names it; one right up to it succeeds.
func TestCap(t *testing.T) {
	t.Parallel()
	m, c, _ := newManager(t)
	m.Start(policy(time.Minute, 5*time.Minute, ActionPause))
	c.Advance(30 * time.Second)
	m.Pause()
	c.Advance(time.Hour)
	m.Resume()
	capAt := c.Now().Add(4*time.Minute + 30*time.Second)
	for _, mode := range []Mode{ModeExact, ModeAtLeast} {
		_, err := m.SetTimeout(4*time.Minute+31*time.Second, mode)
		var ce *CapError
		if !errors.Is(err, ErrPastCap) || !errors.As(err, &ce) || !ce.Cap.Equal(capAt) {
			t.Fatalf("past the cap (%v): %v", mode, err)
		}
		if want := fmt.Sprintf("cap_unix_ms=%d", capAt.UnixMilli()); ce.PublicMessage() != "timeout_ms reaches past the sandbox's cap: "+want {
			t.Fatalf("message %q", ce.PublicMessage())
		}
	}
	st, err := m.SetTimeout(4*time.Minute+30*time.Second, ModeExact)
	if err != nil || !st.Deadline.Equal(capAt) || !st.Cap.Equal(capAt) {
		t.Fatalf("up to the cap: %+v %v", st, err)
	}
}

func TestPauseActionAndResumeGrace(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(Policy{Timeout: time.Minute, Cap: 8 * time.Hour, Action: ActionPause})
	c.Advance(time.Minute)
	if e.count() != 1 || e.got[0] != ActionPause || m.Phase() != PhaseExpired || !m.Holds() {
		t.Fatalf("expiry: %v %v", e.got, m.Phase())
	}
	// Nobody suspends it: it stays expired.
	c.Advance(time.Hour)
	if e.count() != 1 || m.Phase() != PhaseExpired {
		t.Fatalf("expired twice without a resume: %d", e.count())
	}
	// The platform suspends and resumes it: 30 s of grace.
	m.Pause()
	c.Advance(24 * time.Hour)
	m.Resume()
	if st := m.State(); st.Phase != PhaseResumeGrace || st.Deadline.Sub(c.Now()) != DefaultGrace || !m.Holds() {
		t.Fatalf("after resume: %+v", st)
	}
	c.Advance(DefaultGrace - time.Second)
	if e.count() != 1 {
		t.Fatal("grace ended early")
	}
	// Without an extension, the action happens again.
	c.Advance(time.Second)
	if e.count() != 2 || m.Phase() != PhaseExpired {
		t.Fatalf("after the grace: %d, %v", e.count(), m.Phase())
	}
	// Another resume; this time a SetTimeout extends it.
	m.Pause()
	m.Resume()
	c.Advance(10 * time.Second)
	st, err := m.SetTimeout(5*time.Minute, ModeAtLeast)
	if err != nil || st.Phase != PhaseActive || m.Holds() || st.Extensions != 1 {
		t.Fatalf("extension in grace: %+v %v", st, err)
	}
	c.Advance(5*time.Minute - time.Second)
	if e.count() != 2 {
		t.Fatal("expired before the extended deadline")
	}
	c.Advance(time.Second)
	if e.count() != 3 {
		t.Fatal("did not expire at the extended deadline")
	}
	// SetTimeout while expired (pause mode) revives it too.
	st, err = m.SetTimeout(time.Minute, ModeExact)
	if err != nil || st.Phase != PhaseActive || st.Deadline.Sub(c.Now()) != time.Minute {
		t.Fatalf("SetTimeout while expired: %+v %v", st, err)
	}
}

// With auto_resume, a sandbox paused by its timeout is active again when
// resumed, with its timeout once more (never past the cap), so the
// request that woke it is answered; at the cap it gets the grace.
func TestAutoResumeGivesANewDeadline(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(Policy{Timeout: time.Minute, Cap: 150 * time.Second, Action: ActionPause, AutoResume: true})
	if !m.State().AutoResume {
		t.Fatal("auto_resume not reported")
	}
	c.Advance(time.Minute)
	if e.count() != 1 || m.Phase() != PhaseExpired {
		t.Fatalf("expiry: %d %v", e.count(), m.Phase())
	}
	m.Pause()
	c.Advance(time.Hour)
	m.Resume()
	st := m.State()
	if st.Phase != PhaseActive || m.Holds() || st.Deadline.Sub(c.Now()) != time.Minute || st.Extensions != 1 {
		t.Fatalf("after an auto-resume: %+v", st)
	}
	c.Advance(time.Minute)
	if e.count() != 2 {
		t.Fatal("the new deadline did not expire")
	}
	// 120 s ran; the cap is at 150 s: the next deadline is the cap.
	m.Pause()
	m.Resume()
	if st := m.State(); st.Phase != PhaseActive || st.Deadline.Sub(c.Now()) != 30*time.Second {
		t.Fatalf("capped: %+v", st)
	}
	c.Advance(30 * time.Second)
	// At the cap: nothing more to give; the grace, clamped to the cap, is
	// over at once.
	m.Pause()
	m.Resume()
	if m.Phase() == PhaseActive {
		t.Fatalf("active past the cap: %+v", m.State())
	}
}

// The grace never reaches past the cap: at the cap the action repeats at
// once.
func TestGraceClampedByCap(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(policy(2*time.Minute, 2*time.Minute+10*time.Second, ActionPause))
	c.Advance(2 * time.Minute)
	m.Pause()
	m.Resume()
	if r := remaining(m, c); r != 10*time.Second || m.Phase() != PhaseResumeGrace {
		t.Fatalf("grace %v, %v", r, m.Phase())
	}
	c.Advance(10 * time.Second)
	if e.count() != 2 {
		t.Fatalf("expiries %d", e.count())
	}
	m.Pause()
	m.Resume()
	c.Advance(0)
	if e.count() != 3 || m.Phase() != PhaseExpired {
		t.Fatalf("at the cap: %d %v", e.count(), m.Phase())
	}
	if _, err := m.SetTimeout(time.Second, ModeExact); !errors.Is(err, ErrPastCap) {
		t.Fatalf("SetTimeout at the cap: %v", err)
	}
}

// A suspend during the grace stops it; the next resume starts a new one.
func TestSuspendDuringGrace(t *testing.T) {
	t.Parallel()
	m, c, e := newManager(t)
	m.Start(policy(time.Minute, time.Hour, ActionPause))
	c.Advance(time.Minute)
	m.Pause()
	m.Resume()
	c.Advance(20 * time.Second)
	m.Pause()
	c.Advance(time.Hour)
	m.Resume()
	if r := remaining(m, c); r != DefaultGrace {
		t.Fatalf("second grace %v", r)
	}
	c.Advance(DefaultGrace)
	if e.count() != 2 {
		t.Fatalf("expiries %d", e.count())
	}
}

func TestStartOnce(t *testing.T) {
	t.Parallel()
	m, c, _ := newManager(t)
	m.Start(policy(time.Minute, time.Hour, ActionKill))
	c.Advance(time.Second)
	m.Start(policy(time.Hour, 2*time.Hour, ActionPause))
	if st := m.State(); st.Action != ActionKill || st.Deadline.Sub(c.Now()) != time.Minute-time.Second {
		t.Fatalf("second Start changed the policy: %+v", st)
	}
}

func TestPolicyFrom(t *testing.T) {
	t.Parallel()
	if _, ok := PolicyFrom(nil); ok {
		t.Fatal("nil block is a policy")
	}
	p, ok := PolicyFrom(&runpayload.Lifecycle{TimeoutS: 60, CapS: 600, OnTimeout: runpayload.OnTimeoutPause, AutoResume: true})
	if !ok || p != (Policy{Timeout: time.Minute, Cap: 10 * time.Minute, Action: ActionPause, AutoResume: true}) {
		t.Fatalf("pause: %+v", p)
	}
	p, _ = PolicyFrom(&runpayload.Lifecycle{TimeoutS: 1, CapS: 120, OnTimeout: runpayload.OnTimeoutKill})
	if p.Action != ActionKill || p.Timeout != time.Second {
		t.Fatalf("kill: %+v", p)
	}
}

// With the system clock the action comes on time, once.
func TestRealClock(t *testing.T) {
	t.Parallel()
	fired := make(chan Action, 2)
	m := New(Options{OnExpire: func(a Action) { fired <- a }})
	start := time.Now()
	m.Start(policy(50*time.Millisecond, time.Hour, ActionKill))
	select {
	case a := <-fired:
		if a != ActionKill || time.Since(start) < 50*time.Millisecond {
			t.Fatalf("fired %v after %v", a, time.Since(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not fire")
	}
	select {
	case <-fired:
		t.Fatal("fired twice")
	case <-time.After(100 * time.Millisecond):
	}
}

// Concurrent calls are safe (run with -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := New(Options{OnExpire: func(Action) {}})
	m.Start(policy(20*time.Millisecond, time.Hour, ActionPause))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				switch (i + j) % 5 {
				case 0:
					m.Pause()
				case 1:
					m.Resume()
				case 2:
					_, _ = m.SetTimeout(time.Duration(j%7+1)*time.Millisecond, ModeAtLeast)
				case 3:
					_ = m.State()
				default:
					_ = m.Holds()
				}
			}
		})
	}
	wg.Wait()
}
