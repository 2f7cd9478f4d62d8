package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// MakeDir creates a directory and its missing parents, owned by the user
// (also where only rayd may create them, as envd: safefs.Options.Envd).
// An existing directory is already_exists (the SDK's makeDir → false).
func (s *Service) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	p, err := s.path(u, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	resp, err := s.files.MakeDir(ctx, connect.NewRequest(&raydv1.MakeDirRequest{Path: p, User: u}))
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entry(resp.Msg.GetEntry())}), nil
}
