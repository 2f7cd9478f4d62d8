// Package process implements ProcessService: it starts commands through the
// proc supervisor and streams their output. One file per RPC.
package process

import (
	"log/slog"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Service implements raydv1connect.ProcessServiceHandler.
type Service struct {
	state   *sandbox.State
	sup     *proc.Supervisor
	builder *launch.Builder
	log     *slog.Logger
}

var _ raydv1connect.ProcessServiceHandler = (*Service)(nil)

// New returns the service.
func New(state *sandbox.State, sup *proc.Supervisor, builder *launch.Builder, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{state: state, sup: sup, builder: builder, log: log}
}

// boot returns the installed configuration. The auth interceptor already
// refused calls before /run, so nil here is an internal error.
func (s *Service) boot() (*sandbox.Boot, error) {
	if b := s.state.Boot(); b != nil {
		return b, nil
	}
	return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
}

// lookup finds a live or recently ended process.
func (s *Service) lookup(pid uint32) (*proc.Process, error) {
	p, err := s.sup.Get(int(pid))
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return p, nil
}

// info renders a process for List.
func info(p *proc.Process) *raydv1.ProcessInfo {
	spec := p.Spec()
	pi := &raydv1.ProcessInfo{
		Pid:           uint32(p.Pid()),
		Kind:          raydv1.ProcessKind_PROCESS_KIND_PROCESS,
		StartedUnixMs: p.StartedAt().UnixMilli(),
	}
	switch req := spec.Config.(type) {
	case *raydv1.StartRequest:
		pi.Config = req.GetProcess()
		pi.Tag = req.Tag
	case *raydv1.PtyStart:
		// The login shell as started; argv[0] ("-bash") is not an arg.
		pi.Config = &raydv1.ProcessConfig{Cmd: spec.Path, Envs: req.GetEnvs(), Cwd: req.Cwd}
	}
	if p.Kind() == proc.KindPTY {
		pi.Kind = raydv1.ProcessKind_PROCESS_KIND_PTY
	}
	if spec.Identity != nil {
		pi.Username = spec.Identity.Username
	}
	return pi
}
