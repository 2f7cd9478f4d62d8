package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SendInput writes to a process's stdin (input.stdin) or its terminal
// (input.pty).
func (s *Service) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := s.live(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	switch in := req.Msg.GetInput().GetInput().(type) {
	case *process.ProcessInput_Stdin:
		err = p.WriteStdin(ctx, in.Stdin)
	case *process.ProcessInput_Pty:
		err = p.WriteInput(ctx, in.Pty)
	default:
		return nil, rpcerr.Invalid("input is required (stdin or pty)")
	}
	if err != nil {
		return nil, rpcerr.EnvdProcess(err, uint32(p.Pid()))
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}
