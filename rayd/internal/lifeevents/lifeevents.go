// Package lifeevents prints rayd's signed lifecycle event lines
// (proto/events) on its stdout, the stream the platform logs.
//
// The SDK pushes the sandbox's own key (never the stack key) through
// ConfigureService's lifecycle_events section; SetKey installs it and, the
// first time, emits created (generation 1). Then rayd's lifecycle emits
// paused, resumed and, once, killed; every event gets the next generation,
// a fresh event id and the wall-clock time. Without a key nothing is
// printed.
//
// Printing never blocks rayd: lines go through a bounded queue to one
// writer goroutine that writes each line with a single Write (one line,
// one write: a reader never sees two lines interleaved). When the queue is
// full (stdout does not drain) a line is dropped and counted. Flush waits,
// bounded, for the queue to drain: before a suspend freezes the machine
// and before rayd exits.
package lifeevents

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// QueueLen is how many lines may wait for stdout before new ones are
// dropped.
const QueueLen = 64

// Options configure an Emitter.
type Options struct {
	// Out is where lines go (rayd's stdout); nil: io.Discard.
	Out io.Writer
	// SandboxID returns the sandbox's id (the microvmId of /run).
	SandboxID func() string
	// ImageARN is the image the sandbox runs, or "" when unknown. A value
	// that is not a plausible ARN is ignored.
	ImageARN string
	// Now is the wall clock; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Emitter emits one sandbox's event lines.
type Emitter struct {
	out       io.Writer
	sandboxID func() string
	imageARN  string
	now       func() time.Time
	log       *slog.Logger

	mu      sync.Mutex
	key     []byte // nil: events off
	gen     uint64
	created bool
	killed  bool

	startOnce sync.Once
	q         chan string
	pending   atomic.Int64 // lines queued or being written
	dropped   atomic.Uint64
	failed    atomic.Uint64
	warned    atomic.Bool
}

// New returns an emitter with events off.
func New(o Options) *Emitter {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SandboxID == nil {
		o.SandboxID = func() string { return "" }
	}
	arn := o.ImageARN
	if !plausibleARN(arn) {
		if arn != "" {
			o.Logger.Warn("lifecycle events: the image ARN is not an ARN; events carry none")
		}
		arn = ""
	}
	return &Emitter{out: o.Out, sandboxID: o.SandboxID, imageARN: arn, now: o.Now, log: o.Logger, q: make(chan string, QueueLen)}
}

func plausibleARN(s string) bool {
	if !strings.HasPrefix(s, "arn:") || len(s) > events.MaxImageARNLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		// Nothing JSON escapes: an ARN's characters only.
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// SetKey installs the sandbox's key (events.KeySize bytes; the caller
// checks) or, with an empty key, turns events off. The first key
// installed emits created.
func (e *Emitter) SetKey(key []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(key) == 0 {
		e.key = nil
		return
	}
	e.key = append([]byte(nil), key...)
	if !e.created && !e.killed {
		e.created = true
		e.emitLocked(events.Created, "")
	}
}

// Enabled reports whether a key is installed.
func (e *Emitter) Enabled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.key != nil
}

// Paused emits paused (with a key, before killed).
func (e *Emitter) Paused() { e.emit(events.Paused, "") }

// Resumed emits resumed (with a key, before killed).
func (e *Emitter) Resumed() { e.emit(events.Resumed, "") }

// Killed emits killed with reason, once: later calls do nothing. A kill
// without a key installed is still the end: a key installed later emits
// nothing.
func (e *Emitter) Killed(reason events.KillReason) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.killed {
		return
	}
	e.killed = true
	if e.key != nil {
		e.emitLocked(events.Killed, reason)
	}
}

func (e *Emitter) emit(t events.Type, reason events.KillReason) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.key == nil || e.killed {
		return
	}
	e.emitLocked(t, reason)
}

// emitLocked encodes the next event and queues its line; e.mu is held,
// so generations are queued in order.
func (e *Emitter) emitLocked(t events.Type, reason events.KillReason) {
	id, err := events.NewEventID()
	if err != nil {
		e.fail("lifecycle events: no random event id; event dropped")
		return
	}
	e.gen++
	ev := events.Event{
		EventID:      id,
		SandboxID:    e.sandboxID(),
		Type:         t,
		KillReason:   reason,
		Generation:   e.gen,
		OccurredAtMs: e.now().UnixMilli(),
		ImageARN:     e.imageARN,
	}
	line, err := events.Encode(e.key, ev)
	if err != nil {
		// Only a sandbox id outside the event format can get here.
		e.fail("lifecycle events: the event does not encode (sandbox id format); event dropped")
		return
	}
	e.startOnce.Do(func() { go e.writer() })
	e.pending.Add(1)
	select {
	case e.q <- line + "\n":
	default:
		e.pending.Add(-1)
		if n := e.dropped.Add(1); n == 1 || n&(n-1) == 0 {
			e.log.Warn("lifecycle events: stdout does not drain; event line dropped", "dropped", n)
		}
	}
}

func (e *Emitter) fail(msg string) {
	e.failed.Add(1)
	e.log.Warn(msg)
}

// writer writes the queued lines, one Write each.
func (e *Emitter) writer() {
	for line := range e.q {
		if _, err := io.WriteString(e.out, line); err != nil {
			e.failed.Add(1)
			if !e.warned.Swap(true) {
				e.log.Warn("lifecycle events: writing to stdout failed; event lines are lost", "err_class", "write")
			}
		}
		e.pending.Add(-1)
	}
}

// Flush waits until every queued line is written, at most d, and reports
// whether it was.
func (e *Emitter) Flush(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for e.pending.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// Dropped is how many lines were dropped because stdout did not drain.
func (e *Emitter) Dropped() uint64 { return e.dropped.Load() }

// Failed is how many events could not be encoded or written.
func (e *Emitter) Failed() uint64 { return e.failed.Load() }

// Generation is the generation of the last event emitted (0: none).
func (e *Emitter) Generation() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen
}
