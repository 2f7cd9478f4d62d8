package proc

import (
	"context"
	"syscall"
	"time"
)

// StatusSandboxTimeout is the ExitInfo.Status of a process ended by the
// sandbox's own timeout ([Supervisor.Expire]); its Err is
// ExitErrSandboxTimeout. It wins over every other status.
const StatusSandboxTimeout = "sandbox_timeout"

// ExitErrSandboxTimeout is the ExitInfo.Err value of a process ended by the
// sandbox's timeout.
const ExitErrSandboxTimeout = "sandbox_timeout"

// Expire ends every live process because the sandbox's timeout expired:
// each is marked so that its End event says StatusSandboxTimeout, however
// it then ends, and its group gets SIGTERM; the groups still present after
// grace (or once ctx is done) get SIGKILL. Expire waits until they are gone
// or ctx is done, and returns how many processes it marked. Unlike
// Shutdown it leaves the supervisor running.
func (s *Supervisor) Expire(ctx context.Context, grace time.Duration) int {
	s.mu.Lock()
	procs := make([]*Process, 0, len(s.live))
	for p := range s.live {
		procs = append(procs, p)
	}
	s.mu.Unlock()

	marked := procs[:0]
	for _, p := range procs {
		p.mu.Lock()
		if !p.ended {
			p.expired = true
			marked = append(marked, p)
		}
		p.mu.Unlock()
	}
	for _, p := range marked {
		p.signalGroup(syscall.SIGTERM)
	}
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	if !waitGone(marked, graceTimer.C, ctx.Done()) {
		for _, p := range marked {
			// Also reaches members left behind by a leader that ended.
			_ = killGroup(p.pid, syscall.SIGKILL)
		}
		waitGone(marked, nil, ctx.Done())
	}
	s.log.Debug("processes expired", "processes", len(marked))
	return len(marked)
}

// expiredExit turns e into the exit of a process ended by the sandbox's
// timeout; the leader's wait status is kept.
func expiredExit(e ExitInfo) ExitInfo {
	e.Status = StatusSandboxTimeout
	e.Err = ExitErrSandboxTimeout
	return e
}
