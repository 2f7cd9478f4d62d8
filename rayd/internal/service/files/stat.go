package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Stat describes one entry with lstat semantics: a symbolic link as itself
// (type SYMLINK, symlink_target), links above it followed as for Read.
func (s *Service) Stat(ctx context.Context, req *connect.Request[raydv1.StatRequest]) (*connect.Response[raydv1.StatResponse], error) {
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	e, err := s.fs.Stat(ctx, u, req.Msg.GetPath())
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.StatResponse{Entry: entryInfo(e)}), nil
}
