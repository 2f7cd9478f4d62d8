package process

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// CloseStdin closes the stdin of a process started with stdin=true.
func (s *Service) CloseStdin(_ context.Context, req *connect.Request[raydv1.CloseStdinRequest]) (*connect.Response[raydv1.CloseStdinResponse], error) {
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return nil, err
	}
	if err := p.CloseStdin(); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.CloseStdinResponse{}), nil
}
