package code

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Reattach follows an execution again from from_seq (0: from the first
// event still held): it replays what it holds and follows until the end.
// Executions stay reattachable 30 s after they end. Cancelling a Reattach
// only detaches.
func (s *Service) Reattach(ctx context.Context, req *connect.Request[raydv1.ReattachRequest], stream *connect.ServerStream[raydv1.ExecuteEvent]) error {
	if _, err := s.boot(); err != nil {
		return err
	}
	m := req.Msg
	cc, err := s.context(m.GetContextId())
	if err != nil {
		return rpcerr.From(err)
	}
	e, err := cc.execution(m.GetExecutionId())
	if err != nil {
		return rpcerr.From(err)
	}
	return s.stream(ctx, e, m.GetFromSeq(), ExecuteOptions{}, stream.Send)
}
