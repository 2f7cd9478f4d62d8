package proc

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// Process is a started command: the leader of its own process group. It
// stays valid after the process ended; the Supervisor forgets it after
// Options.EndedRetention. All methods are safe for concurrent use.
type Process struct {
	sup       *Supervisor
	pid       int
	spec      Spec
	startedAt time.Time
	done      chan struct{}
	outputs   []*os.File // read ends of stdout and stderr, or the PTY master; each closed by its reader
	master    *os.File   // PTY master (also outputs[0]); nil for pipes

	// stdinSem serialises writers (stdin pipe or PTY master) without
	// holding mu during a write.
	stdinSem chan struct{}

	mu          sync.Mutex
	paced       sync.Cond // signalled when the fastest subscriber may have caught up
	stdin       *os.File  // write end; nil once closed
	stdinClosed bool
	ring        ring
	subs        map[*Subscription]struct{} // attached subscribers (not cut, closed or finished)
	readersLeft int
	reaped      bool
	raw         rawExit
	timedOut    bool
	expired     bool // ended by the sandbox's timeout (Supervisor.Expire)
	killSent    bool // rayd sent the group SIGKILL (not an OOM kill)
	oomBase     uint64
	oomKnown    bool        // oomBase is the OOM kill count before the fork
	timer       *time.Timer // timeout, then kill grace
	ended       bool
	exit        ExitInfo
	evicted     bool
}

func newProcess(s *Supervisor, pid int, spec Spec, started time.Time, outputs []*os.File, stdin, master *os.File) *Process {
	p := &Process{
		sup:         s,
		pid:         pid,
		spec:        spec,
		startedAt:   started,
		done:        make(chan struct{}),
		outputs:     outputs,
		master:      master,
		stdinSem:    make(chan struct{}, 1),
		stdin:       stdin,
		stdinClosed: stdin == nil,
		ring:        newRing(s.opts.RingBytes, &s.held),
		subs:        make(map[*Subscription]struct{}),
		readersLeft: len(outputs),
	}
	p.paced.L = &p.mu
	return p
}

// Pid returns the process id of the leader, which is also its process
// group id.
func (p *Process) Pid() int { return p.pid }

// Spec returns the Spec the process was started with. Its slices are shared
// and must not be modified.
func (p *Process) Spec() Spec { return p.spec }

// StartedAt returns when the process was started.
func (p *Process) StartedAt() time.Time { return p.startedAt }

// Done is closed once the process has ended: its leader was reaped, its
// output was drained and the End event was published.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns the exit information and true once the process has ended.
func (p *Process) Exit() (ExitInfo, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.ended
}

// Signal sends sig to the whole process group (kill(-pgid, sig)).
// It returns ErrProcessEnded once the process has ended or when no member of
// the group is left.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return ErrProcessEnded
	}
	p.noteSignalLocked(sig)
	err := killGroup(p.pid, sig)
	if errors.Is(err, errGroupGone) {
		return ErrProcessEnded
	}
	return err
}

// signalGroup signals the group of a process that has not ended; it is
// used by timeouts and Shutdown and ignores errors.
func (p *Process) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended {
		p.noteSignalLocked(sig)
		_ = killGroup(p.pid, sig)
	}
}

// WriteStdin writes all of b to the child's stdin pipe. It blocks while the
// pipe is full, at most until ctx is done (it then returns ctx.Err(); part
// of b may have been written). Concurrent writes are serialised.
//
// Errors: ErrStdinNotEnabled without Spec.Stdin, ErrStdinClosed after
// CloseStdin or when the child closed its end, ErrProcessEnded once the
// process has ended.
func (p *Process) WriteStdin(ctx context.Context, b []byte) error {
	if !p.spec.Stdin {
		return ErrStdinNotEnabled
	}
	select {
	case p.stdinSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.stdinSem }()

	f, err := p.stdinFile()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = writeCtx(ctx, f, b)
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return cerr
	}
	if _, serr := p.stdinFile(); serr != nil {
		return serr // closed or ended meanwhile
	}
	if errors.Is(err, syscall.EPIPE) {
		return ErrStdinClosed
	}
	return err
}

// writeCtx writes all of b to f, giving up when ctx is done.
func writeCtx(ctx context.Context, f *os.File, b []byte) error {
	// A previous call may have left an expired deadline behind.
	_ = f.SetWriteDeadline(time.Time{})
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = f.SetWriteDeadline(time.Unix(1, 0)) // in the past: unblock the write
		close(fired)
	})
	_, err := f.Write(b)
	if !stop() {
		<-fired
	}
	return err
}

func (p *Process) stdinFile() (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.ended:
		return nil, ErrProcessEnded
	case p.stdinClosed:
		return nil, ErrStdinClosed
	}
	return p.stdin, nil
}

// CloseStdin closes the child's stdin pipe; the child reads EOF. A write
// blocked in WriteStdin returns ErrStdinClosed.
func (p *Process) CloseStdin() error {
	if !p.spec.Stdin {
		return ErrStdinNotEnabled
	}
	p.mu.Lock()
	f, err := p.stdin, error(nil)
	switch {
	case p.ended:
		err = ErrProcessEnded
	case p.stdinClosed:
		err = ErrStdinClosed
	default:
		p.stdin, p.stdinClosed = nil, true
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Close()
}

// readLoop copies one output pipe (or the PTY master) into the ring until
// EOF, a read error (EIO on a master whose slave side is closed everywhere),
// or DrainAfterExit without data once the leader has been reaped.
func (p *Process) readLoop(f *os.File, stream Stream, size int) {
	buf := make([]byte, size)
	for {
		if p.waitForSubscribers() {
			// The drain deadline may have passed while we waited; the
			// data still in the pipe is owed to the subscribers.
			_ = f.SetReadDeadline(time.Now().Add(p.sup.opts.DrainAfterExit))
		}
		n, err := f.Read(buf)
		if n > 0 {
			// append, not make+copy: a fresh slice is not zeroed first
			// (6 % of rayd's CPU while streaming 64 KiB chunks).
			data := append([]byte(nil), buf[:n]...)
			if p.appendOutput(stream, data) {
				_ = f.SetReadDeadline(time.Now().Add(p.sup.opts.DrainAfterExit))
			}
		}
		if err != nil {
			break
		}
	}
	_ = f.Close()
	p.mu.Lock()
	p.readersLeft--
	finish := p.readersLeft == 0 && p.reaped
	p.mu.Unlock()
	if finish {
		p.finish()
	}
}

// appendOutput stores one chunk, applies the retention policy and wakes the
// subscribers. It never waits for a subscriber. It reports whether the
// leader has been reaped (the reader then extends its drain deadline).
func (p *Process) appendOutput(stream Stream, data []byte) (reaped bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring.push(stream, data, now)
	p.enforceLocked()
	for sub := range p.subs {
		sub.wakeLocked()
	}
	return p.reaped
}

// enforceLocked applies the retention policy after the ring grew: a
// subscriber whose next chunk is outside the replay window is cut when it
// lags more than MaxSubscriberLag behind the fastest subscriber, or (oldest
// first) while the supervisor holds more than OutputBudget bytes; then
// chunks nobody needs are dropped. The fastest subscriber is never cut
// here: when it falls MaxSubscriberLag behind the head, the readers pause
// instead (see waitForSubscribers), so a client reading slower than the
// process writes still gets all of the output.
func (p *Process) enforceLocked() {
	opts := &p.sup.opts
	fastest := p.fastestLocked()
	for sub := range p.subs {
		if sub != fastest && sub.cursor < p.ring.winStart &&
			p.ring.lag(sub.cursor)-p.ring.lag(fastest.cursor) > int64(opts.MaxSubscriberLag) {
			p.cutLocked(sub, "lag")
		}
	}
	p.trimLocked()
	for p.sup.held.Load() > opts.OutputBudget {
		var victim *Subscription
		for sub := range p.subs {
			if sub != fastest && sub.cursor < p.ring.winStart && (victim == nil || sub.cursor < victim.cursor) {
				victim = sub
			}
		}
		if victim == nil {
			break
		}
		p.cutLocked(victim, "budget")
		p.trimLocked()
	}
}

// fastestLocked returns the attached subscriber furthest ahead, or nil.
func (p *Process) fastestLocked() *Subscription {
	var fastest *Subscription
	for sub := range p.subs {
		if fastest == nil || sub.cursor > fastest.cursor {
			fastest = sub
		}
	}
	return fastest
}

// mustPauseLocked reports whether the readers must stop reading the pipes:
// every attached subscriber is behind the replay window and even the
// fastest lags more than MaxSubscriberLag (or the output budget is spent).
// A subscriber that stops reading is cut after StuckAfter, which resumes
// the readers; one that goes away resumes them at once.
func (p *Process) mustPauseLocked() bool {
	fastest := p.fastestLocked()
	if fastest == nil || fastest.cursor >= p.ring.winStart {
		return false
	}
	return p.ring.lag(fastest.cursor) > int64(p.sup.opts.MaxSubscriberLag) ||
		p.sup.held.Load() > p.sup.opts.OutputBudget
}

// waitForSubscribers blocks while mustPauseLocked holds, so the process
// feels the pipe's backpressure. It reports whether it waited and the
// leader has been reaped.
func (p *Process) waitForSubscribers() (waitedAfterReap bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	waited := false
	for p.mustPauseLocked() {
		waited = true
		p.paced.Wait()
	}
	return waited && p.reaped
}

// trimLocked drops the chunks before the replay window that no attached
// subscriber still needs.
func (p *Process) trimLocked() {
	keep := p.ring.winStart
	for sub := range p.subs {
		keep = min(keep, sub.cursor)
	}
	p.ring.dropBefore(keep)
}

// cutLocked detaches sub: its next Next returns Truncated, then io.EOF.
// The caller trims the ring afterwards.
func (p *Process) cutLocked(sub *Subscription, reason string) {
	delete(p.subs, sub)
	sub.cut = true
	sub.wakeLocked()
	p.paced.Broadcast()
	p.sup.log.Debug("subscriber truncated", "pid", p.pid, "reason", reason, "missed_seq", sub.cursor)
}

// cutStuck cuts the subscribers that have had pending data for StuckAfter
// without calling Next.
func (p *Process) cutStuck(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cut := false
	for sub := range p.subs {
		if sub.waiters > 0 {
			continue
		}
		c := p.ring.get(sub.cursor)
		if c == nil {
			continue // nothing pending
		}
		since := sub.idleSince
		if c.at.After(since) {
			since = c.at
		}
		if now.Sub(since) >= p.sup.opts.StuckAfter {
			p.cutLocked(sub, "stuck")
			cut = true
		}
	}
	if cut {
		p.trimLocked()
	}
}

// onReaped records the leader's wait status. From now on each reader stops
// after DrainAfterExit without data.
func (p *Process) onReaped(r rawExit) {
	p.mu.Lock()
	if p.reaped {
		p.mu.Unlock()
		return
	}
	p.reaped = true
	p.raw = r
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	deadline := time.Now().Add(p.sup.opts.DrainAfterExit)
	for _, f := range p.outputs {
		_ = f.SetReadDeadline(deadline) // fails harmlessly if already closed
	}
	finish := p.readersLeft == 0
	p.mu.Unlock()
	if finish {
		p.finish()
	}
}

// onTimeout starts the timeout escalation: SIGTERM now, SIGKILL after
// KillGrace if the leader is still alive.
func (p *Process) onTimeout() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped || p.timedOut {
		return
	}
	p.timedOut = true
	_ = killGroup(p.pid, syscall.SIGTERM)
	p.timer = time.AfterFunc(p.sup.opts.KillGrace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.reaped {
			_ = killGroup(p.pid, syscall.SIGKILL)
		}
	})
}

// finish runs once, after the leader was reaped and both readers stopped.
func (p *Process) finish() {
	oom := p.diedOfOOM()
	p.mu.Lock()
	p.ended = true
	p.exit = exitInfo(p.raw, p.timedOut)
	if oom {
		p.exit.Status = StatusOOMKilled
	}
	if p.expired {
		p.exit = expiredExit(p.exit)
	}
	stdin := p.stdin
	p.stdin, p.stdinClosed = nil, true
	for sub := range p.subs {
		sub.wakeLocked()
	}
	exit := p.exit
	p.mu.Unlock()
	if stdin != nil {
		_ = stdin.Close()
	}
	p.sup.processEnded(p)
	close(p.done)
	p.sup.log.Debug("process ended", "pid", p.pid, "status", exit.Status, "exit_code", exit.ExitCode)
}

// evict is called when the Supervisor stops retaining an ended process:
// the replay window is released; attached subscribers may still finish
// reading what they need.
func (p *Process) evict() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.evicted {
		return
	}
	p.evicted = true
	p.ring.releaseWindow()
	p.trimLocked()
}

// Subscribe attaches a subscriber to the output.
//
// With fromSeq 0 it replays every chunk still retained, then follows the
// live output. With fromSeq ≥ 1 it starts exactly at that sequence number,
// which must still be retained or be the next one to be produced; otherwise
// it returns ErrOutOfRange. At most Options.MaxSubscribers subscriptions
// follow one process at once (attached, not yet closed, cut or finished);
// one more is ErrTooManySubscribers. On an ended process the retained output is
// replayed and followed by the End event.
//
// A slow subscriber never slows the others down: one that falls too far
// behind a faster one (see Options) or stops calling Next for StuckAfter is
// cut and receives a Truncated event. Only when every attached subscriber
// is more than MaxSubscriberLag behind does the process wait for the
// fastest, as it would on a full pipe, and never longer than StuckAfter.
// Close the subscription when done with it.
func (p *Process) Subscribe(fromSeq uint64) (*Subscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cursor := fromSeq
	if fromSeq == 0 {
		cursor = p.ring.first
	} else if fromSeq < p.ring.first || fromSeq > p.ring.next {
		return nil, ErrOutOfRange
	}
	return p.subscribeLocked(cursor)
}

// SubscribeNew subscribes from the next event p produces: nothing p wrote
// before is replayed (E2B envd's Connect), and an ended process gives its
// End event only. The limits are Subscribe's.
func (p *Process) SubscribeNew() (*Subscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subscribeLocked(p.ring.next)
}

func (p *Process) subscribeLocked(cursor uint64) (*Subscription, error) {
	if len(p.subs) >= p.sup.opts.MaxSubscribers {
		// The security model's cap: each subscriber holds a cursor into
		// the ring and may pin lagging output, so a client cannot multiply
		// the memory one process costs by attaching again and again.
		return nil, ErrTooManySubscribers
	}
	sub := &Subscription{p: p, cursor: cursor, idleSince: time.Now()}
	p.subs[sub] = struct{}{}
	return sub, nil
}

// Subscription is a cursor over a process's output, created by
// Process.Subscribe. Next may be called from several goroutines; each
// event is delivered once.
type Subscription struct {
	p *Process

	// Guarded by p.mu.
	cursor    uint64        // next seq to deliver
	idleSince time.Time     // last time Next was entered or returned
	waiters   int           // goroutines blocked in Next
	ready     chan struct{} // closed to wake the waiters; nil when none wait
	cut       bool
	truncSent bool
	endSent   bool
	closed    bool
}

// wakeLocked wakes every goroutine blocked in Next.
func (s *Subscription) wakeLocked() {
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
}

// Next returns the next event, blocking until one is available or ctx is
// done (it then returns ctx.Err()). Data events come in Seq order, followed
// by exactly one End event; after that, after a Truncated event, or after
// Close, Next returns io.EOF.
func (s *Subscription) Next(ctx context.Context) (Event, error) { return s.NextBatch(ctx, 0) }

// NextBatch is Next, except that a Data event also carries the chunks that
// follow its first one in the ring, of the same stream and already there,
// while its Data stays within max bytes (0: one chunk). A subscriber that
// keeps up gets each chunk as it comes, as from Next; one that fell behind
// catches up in fewer, larger events, with no wait added. The event's Seq
// is its last chunk's: Subscribe(Seq+1) resumes right after it.
func (s *Subscription) NextBatch(ctx context.Context, max int) (Event, error) {
	p := s.p
	for {
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		p.mu.Lock()
		s.idleSince = time.Now()
		switch {
		case s.closed || s.endSent || (s.cut && s.truncSent):
			p.mu.Unlock()
			return Event{}, io.EOF
		case s.cut:
			s.truncSent = true
			ev := Event{Kind: Truncated, Seq: s.cursor}
			p.mu.Unlock()
			return ev, nil
		}
		if c := p.ring.get(s.cursor); c != nil {
			ev := Event{Kind: Data, Stream: c.stream, Seq: c.seq, Data: c.data}
			s.cursor++
			first := ev.Seq
			if max > 0 {
				ev = s.gatherLocked(ev, max)
			}
			if first < p.ring.winStart {
				p.trimLocked() // this subscriber may have been holding the oldest chunk
				p.paced.Broadcast()
			}
			p.mu.Unlock()
			return ev, nil
		}
		if p.ended {
			s.endSent = true
			delete(p.subs, s)
			ev := Event{Kind: End, Seq: p.ring.next, Exit: p.exit}
			p.mu.Unlock()
			return ev, nil
		}
		s.waiters++
		if s.ready == nil {
			s.ready = make(chan struct{})
		}
		ready := s.ready
		p.mu.Unlock()

		var err error
		select {
		case <-ready:
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		s.waiters--
		s.idleSince = time.Now()
		p.mu.Unlock()
		if err != nil {
			return Event{}, err
		}
	}
}

// gatherLocked appends to ev, a Data event of the chunk before the
// cursor, the chunks at the cursor of the same stream while ev.Data stays
// within max bytes, and moves the cursor past them. ev.Data is then a
// copy: the ring's chunks are shared.
func (s *Subscription) gatherLocked(ev Event, max int) Event {
	r := &s.p.ring
	total, end := len(ev.Data), s.cursor
	for c := r.get(end); c != nil && c.stream == ev.Stream && total+len(c.data) <= max; c = r.get(end) {
		total += len(c.data)
		end++
	}
	if end == s.cursor {
		return ev
	}
	data := make([]byte, 0, total)
	data = append(data, ev.Data...)
	for ; s.cursor < end; s.cursor++ {
		c := r.get(s.cursor)
		data = append(data, c.data...)
		ev.Seq = c.seq
	}
	ev.Data = data
	return ev
}

// Close detaches the subscriber and releases the output it was holding.
// Pending and later Next calls return io.EOF. Close is idempotent.
func (s *Subscription) Close() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if _, ok := p.subs[s]; ok {
		delete(p.subs, s)
		p.trimLocked()
		p.paced.Broadcast()
	}
	s.wakeLocked()
}
