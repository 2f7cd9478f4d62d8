package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Update resizes a PTY's window (pty.size; zero fields: 80x24); the
// kernel sends SIGWINCH to its foreground process group. Without pty it
// changes nothing.
func (s *Service) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := s.live(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		cols, rows := req.Msg.GetPty().GetSize().GetCols(), req.Msg.GetPty().GetSize().GetRows()
		if cols > launch.MaxPTYSize || rows > launch.MaxPTYSize {
			return nil, rpcerr.Invalid("pty size out of range: 1..4096 columns and rows")
		}
		if cols == 0 {
			cols = proc.DefaultPTYCols
		}
		if rows == 0 {
			rows = proc.DefaultPTYRows
		}
		if err := p.Resize(uint16(cols), uint16(rows)); err != nil {
			return nil, rpcerr.EnvdProcess(err, uint32(p.Pid()))
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}
