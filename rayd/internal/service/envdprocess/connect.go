package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Connect reattaches to a process by pid or tag as envd does: start
// first, then only what the process produces from now on (nothing it
// wrote before is replayed: envd keeps no output) and the end; a process
// that ended recently gives start and end. An unknown pid is not_found.
// rayd's own ProcessService.Connect replays from any retained seq.
func (s *Service) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub, err := p.SubscribeNew()
	if err != nil {
		return rpcerr.From(err)
	}
	return pump(ctx, p, sub, req.Header(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}
