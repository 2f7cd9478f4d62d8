package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// MakeDir creates a directory and its parents, owned by the user.
func (s *Service) MakeDir(ctx context.Context, req *connect.Request[raydv1.MakeDirRequest]) (*connect.Response[raydv1.MakeDirResponse], error) {
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	e, err := s.fs.MakeDir(ctx, u, req.Msg.GetPath())
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.MakeDirResponse{Entry: entryInfo(e)}), nil
}
