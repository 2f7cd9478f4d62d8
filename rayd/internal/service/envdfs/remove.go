package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Remove removes a file, or a directory with everything in it, as envd
// does. A missing path is not_found.
func (s *Service) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	if _, err := s.files.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: req.Msg.GetPath(), Recursive: true, User: u})); err != nil {
		return nil, rpcerr.EnvdPath(err, req.Msg.GetPath())
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}
