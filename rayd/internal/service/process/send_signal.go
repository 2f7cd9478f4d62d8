package process

import (
	"context"
	"syscall"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SendSignal signals the process group.
func (s *Service) SendSignal(_ context.Context, req *connect.Request[raydv1.SendSignalRequest]) (*connect.Response[raydv1.SendSignalResponse], error) {
	sig, ok := Signal(req.Msg.GetSignal())
	if !ok {
		return nil, rpcerr.Invalid("unknown signal")
	}
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return nil, err
	}
	if err := p.Signal(sig); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.SendSignalResponse{}), nil
}

// Signal maps the contract's signals to the kernel's; unknown values and
// SIGNAL_UNSPECIFIED are refused.
func Signal(s raydv1.Signal) (syscall.Signal, bool) {
	if s == raydv1.Signal_SIGNAL_UNSPECIFIED {
		return 0, false
	}
	if _, known := raydv1.Signal_name[int32(s)]; !known {
		return 0, false
	}
	// The enum's numbers are the Linux signal numbers.
	return syscall.Signal(s), true
}
