package pty

import (
	"context"
	"syscall"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Kill sends SIGKILL to the PTY's process group (the shell's; jobs the
// shell put in groups of their own get SIGHUP when the terminal goes).
func (s *Service) Kill(_ context.Context, req *connect.Request[raydv1.KillRequest]) (*connect.Response[raydv1.KillResponse], error) {
	p, err := s.lookup(req.Msg.GetPid())
	if err != nil {
		return nil, err
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.KillResponse{}), nil
}
