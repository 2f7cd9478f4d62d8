package envdprocess

import (
	"context"
	"syscall"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SendSignal sends SIGKILL or SIGTERM to the process's group. An unknown
// or ended process is not_found (the SDK's kill then returns false).
func (s *Service) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, rpcerr.Invalid("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM")
	}
	p, err := s.live(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.Signal(sig); err != nil {
		return nil, rpcerr.EnvdProcess(err, uint32(p.Pid()))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}
