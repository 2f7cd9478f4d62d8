package process

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// List lists live processes by pid.
func (s *Service) List(context.Context, *connect.Request[raydv1.ListRequest]) (*connect.Response[raydv1.ListResponse], error) {
	procs := s.sup.List()
	out := &raydv1.ListResponse{Processes: make([]*raydv1.ProcessInfo, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, info(p))
	}
	return connect.NewResponse(out), nil
}
