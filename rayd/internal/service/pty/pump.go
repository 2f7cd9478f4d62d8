package pty

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/outstream"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// shape renders PtyServerMessage messages. A PTY has one output stream.
var shape = outstream.Shape[raydv1.PtyServerMessage]{
	Open: func(pid int) *raydv1.PtyServerMessage {
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Started{Started: &raydv1.StartEvent{Pid: uint32(pid)}}}
	},
	Keepalive: func() *raydv1.PtyServerMessage {
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	},
	Data: func(ev proc.Event) *raydv1.PtyServerMessage {
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Data{Data: ev.Data}, Seq: ev.Seq}
	},
	End: func(end *raydv1.EndEvent) *raydv1.PtyServerMessage {
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Exited{Exited: end}}
	},
}

// pump streams a PTY: started{pid}, data, exited, keepalives.
func pump(ctx context.Context, p *proc.Process, sub *proc.Subscription, stream *connect.ServerStream[raydv1.PtyServerMessage]) error {
	return outstream.Pump(ctx, p, sub, stream.Send, shape)
}
