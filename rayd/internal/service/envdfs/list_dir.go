package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// ListDir lists a directory to depth levels (0 means 1, at most 64).
func (s *Service) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	p, err := s.path(u, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	resp, err := s.files.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: p, Depth: req.Msg.GetDepth(), User: u}))
	if err != nil {
		return nil, rpcerr.EnvdPath(err, p)
	}
	es := resp.Msg.GetEntries()
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, len(es))}
	for i, e := range es {
		out.Entries[i] = entry(e)
	}
	return connect.NewResponse(out), nil
}
