package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Stat describes one entry (a symbolic link as itself). A missing path is
// not_found (the SDK's exists() → false).
func (s *Service) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	resp, err := s.files.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: req.Msg.GetPath(), User: u}))
	if err != nil {
		return nil, rpcerr.EnvdPath(err, req.Msg.GetPath())
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entry(resp.Msg.GetEntry())}), nil
}
