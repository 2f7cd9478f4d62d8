package process

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/outstream"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// shape renders ProcessEvent messages.
var shape = outstream.Shape[raydv1.ProcessEvent]{
	Open: func(pid int) *raydv1.ProcessEvent {
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Start{Start: &raydv1.StartEvent{Pid: uint32(pid)}}}
	},
	Keepalive: func() *raydv1.ProcessEvent {
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	},
	Data: func(ev proc.Event) *raydv1.ProcessEvent {
		d := &raydv1.DataEvent{Seq: ev.Seq}
		if ev.Stream == proc.Stderr {
			d.Output = &raydv1.DataEvent_Stderr{Stderr: ev.Data}
		} else {
			d.Output = &raydv1.DataEvent_Stdout{Stdout: ev.Data}
		}
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Data{Data: d}}
	},
	End: func(end *raydv1.EndEvent) *raydv1.ProcessEvent {
		return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: end}}
	},
}

// pump streams a process: start{pid}, data, end, keepalives.
func pump(ctx context.Context, p *proc.Process, sub *proc.Subscription, stream *connect.ServerStream[raydv1.ProcessEvent]) error {
	return outstream.Pump(ctx, p, sub, stream.Send, shape)
}
