package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
)

// List lists the live processes (every one of the supervisor, whichever
// API started it), each with its config.
func (s *Service) List(context.Context, *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	procs := s.sup.List()
	out := &process.ListResponse{Processes: make([]*process.ProcessInfo, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, info(p))
	}
	return connect.NewResponse(out), nil
}
