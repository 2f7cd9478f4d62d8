package rayito

import (
	"context"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// endEvent reads the EndEvent of process and PTY streams.
func endEvent(e *raydv1.EndEvent) (end, cut bool) {
	return e != nil, e.GetStatus() == "suspending"
}

// followEnv is what the stream follower (sdk/internal/follow) needs of
// the sandbox: it waits for it as follow.Reconnect.Await says (the
// control plane first: a paused sandbox is only waited for, never
// woken), and a stream it gives up on is the sandbox's end when the
// control plane says it ended (asked once), else an *RPCError of op.
func (s *Sandbox) followEnv(op string) follow.Env {
	return follow.Env{
		NewReconnect: func() follow.Reconnector { return s.newReconnect() },
		Fail: func(ctx context.Context, err error) error {
			if end := s.endOf(ctx); end != nil {
				return end
			}
			return rpcErr(op, err)
		},
	}
}
