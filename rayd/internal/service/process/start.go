package process

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Start runs a process and streams its events. The process outlives the
// RPC: a client that goes away can reattach with Connect.
func (s *Service) Start(ctx context.Context, req *connect.Request[raydv1.StartRequest], stream *connect.ServerStream[raydv1.ProcessEvent]) error {
	boot, err := s.boot()
	if err != nil {
		return err
	}
	m := req.Msg
	if m.GetKillTree() {
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, "kill_tree is not built yet in this rayd; see docs/features.md")
	}
	if m.GetProcess() == nil {
		return rpcerr.Invalid("process is required")
	}
	spec, err := s.builder.Spec(boot, launch.Request{
		User:    m.GetUser().GetUsername(),
		Cmd:     m.GetProcess().GetCmd(),
		Args:    m.GetProcess().GetArgs(),
		Envs:    m.GetProcess().GetEnvs(),
		Cwd:     m.GetProcess().Cwd,
		Timeout: time.Duration(min(m.GetTimeoutMs(), uint64(1<<53))) * time.Millisecond,
		Stdin:   m.GetStdin(),
		Tag:     m.Tag,
	})
	if err != nil {
		return err
	}
	spec.Config = m
	p, sub, err := s.sup.StartSubscribed(spec)
	if err != nil {
		return rpcerr.From(err)
	}
	return pump(ctx, p, sub, stream)
}
