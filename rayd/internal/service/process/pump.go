package process

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// pump sends start{pid}, then every event of sub, then end, with
// keepalives after silence. It returns when the end was sent, the client
// went away, or the subscriber was cut for falling behind.
func pump(ctx context.Context, p *proc.Process, sub *proc.Subscription, stream *connect.ServerStream[raydv1.ProcessEvent]) error {
	defer sub.Close()
	out := keepalive.Start(limits.KeepAliveInterval, stream.Send, func() *raydv1.ProcessEvent {
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer out.Stop()
	start := &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Start{Start: &raydv1.StartEvent{Pid: uint32(p.Pid())}}}
	if err := out.Send(start); err != nil {
		return err
	}
	for {
		ev, err := sub.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		msg := eventMessage(ev)
		if msg == nil {
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

// eventMessage renders a supervisor event.
func eventMessage(ev proc.Event) *raydv1.ProcessEvent {
	switch ev.Kind {
	case proc.Data:
		d := &raydv1.DataEvent{Seq: ev.Seq}
		if ev.Stream == proc.Stderr {
			d.Output = &raydv1.DataEvent_Stderr{Stderr: ev.Data}
		} else {
			d.Output = &raydv1.DataEvent_Stdout{Stdout: ev.Data}
		}
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Data{Data: d}}
	case proc.End:
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: EndEvent(ev.Exit)}}
	case proc.Truncated:
		reason := "output_truncated"
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: &raydv1.EndEvent{
			Status: reason, Error: &reason,
		}}}
	default:
		return nil
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
