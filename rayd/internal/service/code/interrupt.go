package code

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Interrupt interrupts a running execution as its timeout would (SIGINT,
// then a restart of the kernel if the cell has not stopped 5 s later). An
// execution that already ended answers interrupted false; one that is not
// known (or no longer retained) is NotFound.
func (s *Service) Interrupt(ctx context.Context, req *connect.Request[raydv1.InterruptRequest]) (*connect.Response[raydv1.InterruptResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	m := req.Msg
	cc, err := s.context(m.GetContextId())
	if err != nil {
		return nil, rpcerr.From(err)
	}
	e, err := cc.execution(m.GetExecutionId())
	if err != nil {
		return nil, rpcerr.From(err)
	}
	running := !e.isEnded()
	if running {
		e.cancel()
	}
	return connect.NewResponse(&raydv1.InterruptResponse{Interrupted: running}), nil
}
