package envdprocess

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SendInput writes to a process's stdin (input.stdin) or its terminal
// (input.pty). Stdin of a process started without it, or closed, is
// envd's Internal "stdin not enabled or closed".
func (s *Service) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := s.live(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	switch in := req.Msg.GetInput().GetInput().(type) {
	case *process.ProcessInput_Stdin:
		err = p.WriteStdin(ctx, in.Stdin)
		if errors.Is(err, proc.ErrStdinNotEnabled) || errors.Is(err, proc.ErrStdinClosed) {
			// envd's answer for a process without stdin, or whose stdin
			// was closed.
			return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "error writing to stdin: stdin not enabled or closed")
		}
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
