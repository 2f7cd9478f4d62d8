package envdprocess

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// CloseStdin closes a process's stdin (the command then reads EOF). As on
// envd, a process started without stdin, or whose stdin is closed
// already, has nothing to close: success.
func (s *Service) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := s.live(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.CloseStdin(); err != nil && !errors.Is(err, proc.ErrStdinNotEnabled) && !errors.Is(err, proc.ErrStdinClosed) {
		return nil, rpcerr.EnvdProcess(err, uint32(p.Pid()))
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}
