package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Move renames an entry.
func (s *Service) Move(ctx context.Context, req *connect.Request[raydv1.MoveRequest]) (*connect.Response[raydv1.MoveResponse], error) {
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	e, err := s.fs.Move(ctx, u, req.Msg.GetSource(), req.Msg.GetDestination())
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.MoveResponse{Entry: entryInfo(e)}), nil
}
