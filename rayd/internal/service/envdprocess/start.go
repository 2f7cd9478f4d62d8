package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Start runs a command, on a PTY when pty is set, and streams its events:
// start first, then data (stdout, stderr or pty), keepalives, end. The
// call's deadline (Connect-Timeout-Ms) is the process's lifetime: the
// process gets SIGTERM (SIGKILL after the grace) when it runs out, while a
// client that goes away leaves it running (reattach with Connect).
func (s *Service) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	boot, err := s.boot()
	if err != nil {
		return err
	}
	username, err := user(req.Header())
	if err != nil {
		return err
	}
	m := req.Msg
	cfg := m.GetProcess()
	if cfg == nil {
		return rpcerr.Invalid("process is required")
	}
	lr := launch.Request{
		User:    username,
		Cmd:     cfg.GetCmd(),
		Args:    cfg.GetArgs(),
		Envs:    cfg.GetEnvs(),
		Cwd:     cfg.Cwd,
		Timeout: lifetime(ctx),
		Tag:     m.Tag,
		// envd keeps stdin open unless the request says stdin=false
		// (SDKs before envd 0.3.0 never send the field).
		Stdin: m.Stdin == nil || m.GetStdin(),
	}
	var spec proc.Spec
	if m.Pty != nil {
		cols, rows := m.GetPty().GetSize().GetCols(), m.GetPty().GetSize().GetRows()
		if cols > launch.MaxPTYSize || rows > launch.MaxPTYSize {
			return rpcerr.Invalid("pty size out of range: 1..4096 columns and rows")
		}
		spec, err = s.builder.CommandPTYSpec(boot, lr, uint16(cols), uint16(rows))
	} else {
		spec, err = s.builder.Spec(boot, lr)
	}
	if err != nil {
		return rpcerr.EnvdStart(err, cfg.GetCwd())
	}
	spec.Config = m
	p, sub, err := s.sup.StartSubscribed(spec)
	if err != nil {
		return rpcerr.EnvdStart(err, cfg.GetCwd())
	}
	return pump(ctx, p, sub, req.Header(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}
