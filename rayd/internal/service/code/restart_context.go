package code

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// RestartContext kills a context's kernel and starts a new one: its state
// is lost, its id stays. A running execution ends with stream_error.
func (s *Service) RestartContext(ctx context.Context, req *connect.Request[raydv1.RestartContextRequest]) (*connect.Response[raydv1.RestartContextResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	id := req.Msg.GetContextId()
	cc, err := s.context(id)
	if err != nil {
		if l, ok := defaultLanguage(id); ok {
			cc, err = s.defaultContext(l)
		}
		if err != nil {
			return nil, rpcerr.From(err)
		}
	}
	if err := cc.restart(ctx); err != nil {
		return nil, rpcerr.From(err)
	}
	s.log.Info("code context restarted", "context_id", id)
	return connect.NewResponse(&raydv1.RestartContextResponse{}), nil
}

// defaultLanguage returns the language of a default context id.
func defaultLanguage(id string) (string, bool) {
	if !isDefault(id) {
		return "", false
	}
	l, ok := normLanguage(id[len("default-"):])
	return l, ok && defaultID(l) == id
}
