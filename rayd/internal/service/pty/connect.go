package pty

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Connect reattaches to a PTY, replaying from from_seq.
func (s *Service) Connect(ctx context.Context, req *connect.Request[raydv1.ConnectRequest], stream *connect.ServerStream[raydv1.PtyServerMessage]) error {
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return err
	}
	sub, err := p.Subscribe(req.Msg.GetFromSeq())
	if err != nil {
		return rpcerr.From(err)
	}
	return pump(ctx, p, sub, stream)
}
