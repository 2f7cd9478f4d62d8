package hooks

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// run handles /run from the platform.
func (s *Server) run(w http.ResponseWriter, r *http.Request, p peer) {
	// Read the body before claiming the boot /run, so that a slow body
	// does not hold the claim; the claim itself is atomic.
	microvmID, payload, ok := readEnvelope(w, r)

	s.mu.Lock()
	switch {
	case s.ran:
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookRun, p, result{out: OutcomeAlreadyRan}, true)
		return
	case s.terminating:
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookRun, p, result{out: OutcomeTerminating}, true)
		return
	}
	s.ran = true
	s.mu.Unlock()

	out, anomaly := OutcomeTokenless, true
	if ok {
		out = s.lc.Run(context.WithoutCancel(r.Context()), microvmID, payload)
		anomaly = false
	} else {
		s.log.Warn("hooks: /run envelope is not valid JSON with microvmId and runHookPayload; boot run consumed, rayd stays tokenless",
			slog.String("hook", HookRun), slog.String("caller", string(p.caller)), slog.Int64("uid", p.uid))
	}

	s.mu.Lock()
	if s.phase == PhaseBooting || s.phase == PhaseReady {
		s.phase = PhaseRunning
	}
	s.mu.Unlock()
	s.finish(w, http.StatusOK, HookRun, p, result{out: out}, anomaly)
}

// terminate handles /terminate from the platform.
func (s *Server) terminate(w http.ResponseWriter, p peer) {
	s.mu.Lock()
	if s.terminating {
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookTerminate, p, result{out: OutcomeUnchanged}, false)
		return
	}
	s.terminating = true
	s.phase = PhaseTerminating
	s.stopWatchLocked()
	s.mu.Unlock()

	// What must leave before the answer (the platform may kill the
	// machine as soon as it has it): rayd's killed event line.
	if t, ok := s.lc.(interface{ Terminating() }); ok {
		t.Terminating()
	}
	s.finish(w, http.StatusOK, HookTerminate, p, result{out: OutcomeTerminating}, false)
	// Push the reply out before user processes start dying; a failed flush
	// means the caller is gone, which does not cancel the termination.
	_ = http.NewResponseController(w).Flush()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), TerminateTimeout)
		defer cancel()
		s.lc.Terminate(ctx)
		s.log.Info("hooks: terminate done", slog.String("hook", HookTerminate))
		if s.onTerminated != nil {
			s.onTerminated()
		}
	}()
}

// readyHook handles /ready from the platform or an unknown caller.
func (s *Server) readyHook(w http.ResponseWriter, p peer, anomaly bool) {
	warm := s.readyFn == nil || s.readyFn()
	status := http.StatusOK
	s.mu.Lock()
	var out Outcome
	switch {
	case s.terminating:
		out = OutcomeTerminating
	case s.ran:
		out = OutcomeReadyEscape // nothing restarts after /run
	case !warm:
		out, status = OutcomeKernelWarming, http.StatusServiceUnavailable
	case !s.ready:
		s.ready = true
		if s.phase == PhaseBooting {
			s.phase = PhaseReady
		}
		out = OutcomeChanged
	default:
		out = OutcomeUnchanged
	}
	s.mu.Unlock()
	s.finish(w, status, HookReady, p, result{out: out}, anomaly)
}

// validate handles /validate from the platform or an unknown caller.
func (s *Server) validate(w http.ResponseWriter, p peer, anomaly bool) {
	s.mu.Lock()
	var out Outcome
	switch {
	case s.terminating:
		out = OutcomeTerminating
	case s.ran:
		out = OutcomeValidateSkipped
	case s.validating:
		s.mu.Unlock()
		s.finish(w, http.StatusServiceUnavailable, HookValidate, p, result{out: OutcomeValidating}, anomaly)
		return
	}
	if out != "" {
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookValidate, p, result{out: out}, anomaly)
		return
	}
	s.validating = true
	s.mu.Unlock()

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ValidateBudget)
	err := s.safeValidate(ctx)
	cancel()
	s.mu.Lock()
	s.validating = false
	s.mu.Unlock()
	out = OutcomeValidated
	if err != nil {
		out = OutcomeValidateFailed
		s.log.Error("hooks: validation failed", slog.String("hook", HookValidate), slog.String("err", err.Error()))
	}
	s.log.Debug("hooks: validation done", slog.Duration("took", time.Since(start)))
	s.finish(w, http.StatusOK, HookValidate, p, result{out: out}, anomaly)
}

func (s *Server) safeValidate(ctx context.Context) (err error) {
	defer func() {
		if recover() != nil {
			err = errValidatePanic
		}
	}()
	return s.lc.Validate(ctx)
}

type validateError string

func (e validateError) Error() string { return string(e) }

const errValidatePanic = validateError("the self-check panicked")

// suspend handles /suspend from anyone. It always answers 200.
func (s *Server) suspend(w http.ResponseWriter, p peer, anomaly bool) {
	s.work.Lock()
	s.mu.Lock()
	var out Outcome
	switch {
	case s.terminating:
		out = OutcomeTerminating
	case s.phase == PhaseSuspending:
		out = OutcomeUnchanged
	case s.phase != PhaseRunning && s.phase != PhaseResumed:
		out, anomaly = OutcomeUnchanged, true // before /run: nothing to suspend
	}
	if out != "" {
		s.mu.Unlock()
		s.work.Unlock()
		s.finish(w, http.StatusOK, HookSuspend, p, result{out: out}, anomaly)
		return
	}
	s.phase = PhaseSuspending
	s.suspendGen++
	gen := s.suspendGen
	at := s.now()
	s.suspendedAt = at
	s.stopWatchLocked()
	stop := make(chan struct{})
	s.watchStop = stop
	s.mu.Unlock()

	start := time.Now()
	closed, inTime := s.within(s.suspendBdg, func(ctx context.Context) int { return s.lc.Suspend(ctx) })
	// The watchdog's first reading is taken here, before the answer: the
	// VM can freeze as soon as the answer leaves, even before the
	// goroutine runs, and that freeze must show as a jump.
	go s.watch(gen, stop, at, s.now())
	res := result{out: OutcomeChanged}
	if inTime {
		res.streamsClosed = &closed
	} else {
		res.out = OutcomeBudgetExceeded
		s.log.Warn("hooks: suspend work overran its budget; answering anyway",
			slog.String("hook", HookSuspend), slog.Duration("budget", s.suspendBdg))
	}
	s.log.Info("hooks: suspended", slog.Uint64("suspend_generation", gen), slog.Int("streams_closed", closed), slog.Duration("took", time.Since(start)))
	s.finish(w, http.StatusOK, HookSuspend, p, res, anomaly)
}

// resume handles /resume from anyone.
func (s *Server) resume(w http.ResponseWriter, p peer, anomaly bool) {
	s.work.Lock()
	s.mu.Lock()
	var out Outcome
	switch {
	case s.terminating:
		out = OutcomeTerminating
	case s.phase == PhaseRunning || s.phase == PhaseResumed:
		out = OutcomeUnchanged
	case s.phase != PhaseSuspending:
		out, anomaly = OutcomeUnchanged, true // before /run
	}
	if out != "" {
		s.mu.Unlock()
		s.work.Unlock()
		s.finish(w, http.StatusOK, HookResume, p, result{out: out}, anomaly)
		return
	}
	at := s.now()
	offset := at.Round(0).Sub(s.suspendedAt.Round(0)) // wall clock: the paused time
	s.stopWatchLocked()
	s.mu.Unlock()

	var lost bool
	_, inTime := s.within(s.resumeBdg, func(ctx context.Context) int {
		s.lc.Resume(ctx) // the gate is open before clients learn of the resume
		s.mu.Lock()
		s.phase = PhaseResumed
		s.resumeGen++
		s.clockOffset = offset
		s.mu.Unlock()
		if s.onResume != nil {
			l := s.onResume(ctx)
			s.mu.Lock()
			s.kernelStateLost = l
			s.mu.Unlock()
			lost = l
		}
		return 0
	})
	res := result{out: OutcomeChanged}
	if inTime {
		res.kernelStateLost = &lost
	} else {
		res.out = OutcomeBudgetExceeded
		s.log.Warn("hooks: resume work overran its budget", slog.String("hook", HookResume), slog.Duration("budget", s.resumeBdg))
	}
	s.log.Info("hooks: resumed", slog.Duration("clock_offset", offset))
	s.finish(w, http.StatusOK, HookResume, p, res, anomaly)
}

// within runs work, which holds s.work (taken by the caller and released
// when work returns), and waits for it at most budget. It reports work's
// result and whether it finished in time; work goes on in the background
// otherwise, with its context cancelled at the budget.
func (s *Server) within(budget time.Duration, work func(ctx context.Context) int) (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	done := make(chan int, 1)
	go func() {
		defer s.work.Unlock()
		defer cancel()
		n := 0
		defer func() {
			if recover() != nil {
				s.log.Error("hooks: lifecycle work panicked")
			}
			done <- n
		}()
		n = work(ctx)
	}()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case n := <-done:
		return n, true
	case <-t.C:
		return 0, false
	}
}

// stopWatchLocked ends the current suspend's watchdog, if any.
func (s *Server) stopWatchLocked() {
	if s.watchStop != nil {
		close(s.watchStop)
		s.watchStop = nil
	}
}

// watch is the stale-suspend watchdog of suspend generation gen, accepted
// at start: it returns when the VM freezes (a jump of more than freezeJump
// between ticks), when the suspend ends, or after reopening the gate once
// staleAfter passed without a freeze. last is the clock's reading taken
// before the /suspend answer left.
func (s *Server) watch(gen uint64, stop <-chan struct{}, start, last time.Time) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.done:
			return
		case <-t.C:
		}
		now := s.now()
		if gap := now.Sub(last); gap > s.freezeJump {
			s.log.Info("hooks: the VM froze after /suspend", slog.Uint64("suspend_generation", gen), slog.Duration("gap", gap))
			return
		}
		last = now
		if now.Sub(start) >= s.staleAfter {
			s.reopenStale(gen)
			return
		}
	}
}

// reopenStale reopens the gate of a suspend that no snapshot followed.
func (s *Server) reopenStale(gen uint64) {
	s.work.Lock()
	s.mu.Lock()
	if s.phase != PhaseSuspending || s.suspendGen != gen || s.terminating {
		s.mu.Unlock()
		s.work.Unlock()
		return
	}
	s.watchStop = nil // this watchdog is ending
	// Counted before the gate reopens, so that whoever sees the phase
	// back at running also sees the count.
	n := s.stale.Add(1)
	s.mu.Unlock()
	_, inTime := s.within(s.resumeBdg, func(ctx context.Context) int {
		s.lc.Resume(ctx)
		s.mu.Lock()
		s.phase = PhaseRunning
		s.resumeGen++
		s.mu.Unlock()
		return 0
	})
	s.log.Warn("hooks: no snapshot followed /suspend: the API reopened",
		slog.Uint64("suspend_generation", gen), slog.Duration("after", s.staleAfter), slog.Uint64("stale_suspends", n), slog.Bool("in_time", inTime))
}
