package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Remove removes a file, or a directory with everything in it, as envd
// does (os.RemoveAll): a path that does not exist, or whose parent does
// not, is removed already and succeeds. rayd's own Remove keeps
// answering not_found: its clients (rayito's SDK, sdk/e2b's false) use it.
func (s *Service) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	u, err := user(req.Header())
	if err != nil {
		return nil, err
	}
	p, err := s.path(u, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if _, err := s.files.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: p, Recursive: true, User: u})); err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return connect.NewResponse(&filesystem.RemoveResponse{}), nil
		}
		return nil, rpcerr.EnvdPath(err, p)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}
