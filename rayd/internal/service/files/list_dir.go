package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// maxDepth bounds ListDir's depth; the entry cap bounds the work anyway.
const maxDepth = 64

// ListDir lists a directory to depth levels (0 means 1).
func (s *Service) ListDir(ctx context.Context, req *connect.Request[raydv1.ListDirRequest]) (*connect.Response[raydv1.ListDirResponse], error) {
	depth := req.Msg.GetDepth()
	if depth == 0 {
		depth = 1
	}
	if depth > maxDepth {
		return nil, rpcerr.Invalid("depth is at most 64")
	}
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	es, err := s.fs.ListDir(ctx, u, req.Msg.GetPath(), int(depth))
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.ListDirResponse{Entries: entryInfos(es)}), nil
}
