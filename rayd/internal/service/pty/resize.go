package pty

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Resize changes the window size; the kernel sends SIGWINCH to the
// terminal's foreground process group. Zero fields mean 80x24, as in
// Create.
func (s *Service) Resize(_ context.Context, req *connect.Request[raydv1.ResizeRequest]) (*connect.Response[raydv1.ResizeResponse], error) {
	cols, rows, err := size(req.Msg.GetSize())
	if err != nil {
		return nil, err
	}
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return nil, err
	}
	if err := p.Resize(cols, rows); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.ResizeResponse{}), nil
}
