package pty

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Create starts a login shell on a new PTY and streams its events. The
// PTY outlives the RPC: a client that goes away can reattach with Connect.
func (s *Service) Create(ctx context.Context, req *connect.Request[raydv1.PtyStart], stream *connect.ServerStream[raydv1.PtyServerMessage]) error {
	boot, err := s.boot()
	if err != nil {
		return err
	}
	m := req.Msg
	cols, rows, err := size(m.GetSize())
	if err != nil {
		return err
	}
	spec, err := s.builder.PTYSpec(boot, launch.Request{
		User:    m.GetUser().GetUsername(),
		Envs:    m.GetEnvs(),
		Cwd:     m.Cwd,
		Shell:   m.Shell,
		Timeout: time.Duration(min(m.GetTimeoutMs(), uint64(1<<53))) * time.Millisecond,
	}, cols, rows)
	if err != nil {
		return err
	}
	spec.Config = m
	p, sub, err := s.sup.StartSubscribed(spec)
	if err != nil {
		return rpcerr.From(err)
	}
	s.log.Debug("pty created", "pid", p.Pid(), "cols", cols, "rows", rows)
	return pump(ctx, p, sub, stream)
}
