package pty

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/service/process"
)

// pump sends started{pid}, then every event of sub, then exited, with
// keepalives after silence. It returns when exited was sent, the client
// went away, or the subscriber was cut for falling behind.
func pump(ctx context.Context, p *proc.Process, sub *proc.Subscription, stream *connect.ServerStream[raydv1.PtyServerMessage]) error {
	defer sub.Close()
	out := keepalive.Start(limits.KeepAliveInterval, stream.Send, func() *raydv1.PtyServerMessage {
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer out.Stop()
	started := &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Started{Started: &raydv1.StartEvent{Pid: uint32(p.Pid())}}}
	if err := out.Send(started); err != nil {
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

// eventMessage renders a supervisor event. A PTY has one output stream.
func eventMessage(ev proc.Event) *raydv1.PtyServerMessage {
	switch ev.Kind {
	case proc.Data:
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Data{Data: ev.Data}, Seq: ev.Seq}
	case proc.End:
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Exited{Exited: process.EndEvent(ev.Exit)}}
	case proc.Truncated:
		reason := "output_truncated"
		return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Exited{Exited: &raydv1.EndEvent{
			Status: reason, Error: &reason,
		}}}
	default:
		return nil
	}
}
