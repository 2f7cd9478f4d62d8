package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Remove removes an entry, recursively when asked.
func (s *Service) Remove(ctx context.Context, req *connect.Request[raydv1.RemoveRequest]) (*connect.Response[raydv1.RemoveResponse], error) {
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	if err := s.fs.Remove(ctx, u, req.Msg.GetPath(), req.Msg.GetRecursive()); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.RemoveResponse{}), nil
}
