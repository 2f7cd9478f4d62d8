package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Connect reattaches to a process by pid or tag: start first, the output
// the process still holds (its replay ring), then the live events and the
// end. An unknown pid is not_found.
func (s *Service) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub, err := p.Subscribe(0)
	if err != nil {
		return rpcerr.From(err)
	}
	return pump(ctx, p, sub, req.Header(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}
