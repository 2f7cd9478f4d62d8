// Package outstream sends a supervised process's output on a server stream:
// the opening message, every event of a subscription rendered by the
// service, keepalives after silence, and the end. ProcessService and
// PtyService share it; only their message shapes differ.
package outstream

import (
	"context"
	"errors"
	"io"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// Shape renders one service's messages.
type Shape[T any] struct {
	// Open is the first message (start or started, with the pid).
	Open func(pid int) *T
	// Keepalive is sent after Interval of silence.
	Keepalive func() *T
	// Interval is the silence before a keepalive; 0 means
	// limits.KeepAliveInterval.
	Interval time.Duration
	// Data renders output; End renders the end (or a truncation).
	Data func(ev proc.Event) *T
	End  func(end *raydv1.EndEvent) *T
}

// MaxBatch bounds the output one message carries: the chunks that piled up
// while the previous message was sent go out together (proc's NextBatch),
// up to this many bytes, so a stream that outruns its client pays the
// per-message cost (framing, flush, the client's decoding) once per batch
// instead of once per pipe read.
const MaxBatch = 256 << 10

// Pump sends the opening message, then every event of sub, then the end.
// It returns when the end was sent, the client went away, or the
// subscriber was cut for falling behind (the end then says
// output_truncated). It closes sub.
func Pump[T any](ctx context.Context, p *proc.Process, sub *proc.Subscription, send func(*T) error, shape Shape[T]) error {
	defer sub.Close()
	interval := shape.Interval
	if interval <= 0 {
		interval = limits.KeepAliveInterval
	}
	out := keepalive.Start(interval, send, shape.Keepalive)
	defer out.Stop()
	if err := out.Send(shape.Open(p.Pid())); err != nil {
		return err
	}
	for {
		ev, err := sub.NextBatch(ctx, MaxBatch)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var msg *T
		switch ev.Kind {
		case proc.Data:
			msg = shape.Data(ev)
		case proc.End:
			msg = shape.End(EndEvent(ev.Exit))
		case proc.Truncated:
			reason := "output_truncated"
			msg = shape.End(&raydv1.EndEvent{Status: reason, Error: &reason})
		default:
			continue
		}
		if err := out.Send(msg); err != nil {
			return err
		}
		if ev.Kind != proc.Data {
			return nil
		}
	}
}

// EndEvent renders an exit.
func EndEvent(x proc.ExitInfo) *raydv1.EndEvent {
	e := &raydv1.EndEvent{ExitCode: x.ExitCode, Exited: x.Exited, Status: x.Status}
	if x.Err != "" {
		e.Error = &x.Err
	}
	if x.Signal != 0 {
		sig := int32(x.Signal)
		e.Signal = &sig
	}
	return e
}
