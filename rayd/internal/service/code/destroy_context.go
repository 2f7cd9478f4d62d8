package code

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// DestroyContext kills a context's kernel and removes its directory. A
// default context (default-<language>) cannot be destroyed.
func (s *Service) DestroyContext(_ context.Context, req *connect.Request[raydv1.DestroyContextRequest]) (*connect.Response[raydv1.DestroyContextResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	id := req.Msg.GetContextId()
	if isDefault(id) {
		return nil, rpcerr.From(jupyter.ErrDefaultContext)
	}
	cc, err := s.context(id)
	if err != nil {
		return nil, rpcerr.From(err)
	}
	s.remove(cc)
	cc.destroy()
	s.log.Info("code context destroyed", "context_id", id)
	return connect.NewResponse(&raydv1.DestroyContextResponse{}), nil
}
