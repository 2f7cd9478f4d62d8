package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Move renames source to destination (rename(2) semantics), creating the
// destination's missing parents as envd does, and describes the moved
// entry. A missing source is not_found.
func (s *Service) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	src, err := s.path(u, req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := s.path(u, req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	resp, err := s.files.Move(ctx, connect.NewRequest(&raydv1.MoveRequest{Source: src, Destination: dst, User: u}))
	if err != nil {
		return nil, rpcerr.EnvdPath(err, src)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entry(resp.Msg.GetEntry())}), nil
}
