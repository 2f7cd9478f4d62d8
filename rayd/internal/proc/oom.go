package proc

import "syscall"

// OOM kills. The kernel's OOM killer ends its victim with a SIGKILL that
// looks like any other, so the supervisor tells the two apart with a
// counter of OOM kills (Options.OOMKills): a leader that died of a SIGKILL
// rayd did not send (no timeout, Process.Signal or Shutdown sent it one),
// while the counter rose during its life, ends with Status "oom_killed".
// The counter is read before the fork and again once the leader has been
// reaped (the kernel counts a kill before it sends the signal). Another
// process's OOM kill during the life of a leader that sandbox code killed
// with SIGKILL is indistinguishable and also reads as oom_killed.

// oomBaseline reads the counter before a fork.
func (s *Supervisor) oomBaseline() (count uint64, ok bool) {
	if s.opts.OOMKills == nil {
		return 0, false
	}
	return s.opts.OOMKills()
}

// noteSignalLocked records, before rayd sends sig to the group, that a
// SIGKILL ending the leader came from rayd.
func (p *Process) noteSignalLocked(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p.killSent = true
	}
}

// noteKill is noteSignalLocked(SIGKILL) for callers not holding p.mu.
func (p *Process) noteKill() {
	p.mu.Lock()
	p.killSent = true
	p.mu.Unlock()
}

// diedOfOOM reports whether the reaped leader was an OOM kill. It reads
// the counter only for a leader that died of a SIGKILL rayd did not send.
func (p *Process) diedOfOOM() bool {
	p.mu.Lock()
	r, timedOut, killSent := p.raw, p.timedOut, p.killSent
	base, known := p.oomBase, p.oomKnown
	p.mu.Unlock()
	if !known || !unexplainedKill(r, timedOut, killSent) {
		return false
	}
	now, ok := p.sup.opts.OOMKills()
	return ok && now > base
}

// unexplainedKill reports whether the leader died of a SIGKILL rayd did
// not send: the first half of the rule, the second being a counter that
// rose during the leader's life.
func unexplainedKill(r rawExit, timedOut, killSent bool) bool {
	return !r.exited && r.sig == syscall.SIGKILL && !timedOut && !killSent
}
