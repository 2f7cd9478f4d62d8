package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Stat describes one entry (a symbolic link by where it leads, as envd
// does: see safefs.Options.Envd). A missing path is not_found (the SDK's
// exists() → false).
func (s *Service) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	p, err := s.path(u, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	resp, err := s.files.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: p, User: u}))
	if err != nil {
		return nil, rpcerr.EnvdPath(err, p)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entry(resp.Msg.GetEntry())}), nil
}
