package pty

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SendInput writes keystrokes to the PTY.
func (s *Service) SendInput(ctx context.Context, req *connect.Request[raydv1.SendInputRequest]) (*connect.Response[raydv1.SendInputResponse], error) {
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return nil, err
	}
	if err := p.WriteInput(ctx, req.Msg.GetData()); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.SendInputResponse{}), nil
}
