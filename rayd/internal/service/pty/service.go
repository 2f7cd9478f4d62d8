// Package pty implements PtyService: login shells on pseudo-terminals,
// started through the proc supervisor (they share the process cap, the
// replay ring and the identity rules with ProcessService). One file per
// RPC. Input and output bytes are never logged.
package pty

import (
	"log/slog"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Service implements raydv1connect.PtyServiceHandler.
type Service struct {
	state   *sandbox.State
	sup     *proc.Supervisor
	builder *launch.Builder
	log     *slog.Logger
}

var _ raydv1connect.PtyServiceHandler = (*Service)(nil)

// New returns the service.
func New(state *sandbox.State, sup *proc.Supervisor, builder *launch.Builder, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{state: state, sup: sup, builder: builder, log: log}
}

// boot returns the installed configuration. The auth interceptor already
// refused calls before /run.
func (s *Service) boot() (*sandbox.Boot, error) {
	if b := s.state.Boot(); b != nil {
		return b, nil
	}
	return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
}

// lookup finds a live or recently ended PTY. A pid that belongs to a
// process started by ProcessService is a FailedPrecondition.
func (s *Service) lookup(pid uint32) (*proc.Process, error) {
	p, err := s.sup.Get(int(pid))
	if err != nil {
		return nil, rpcerr.From(err)
	}
	if p.Kind() != proc.KindPTY {
		return nil, rpcerr.From(proc.ErrNotPTY)
	}
	return p, nil
}

// size applies the PtySize rules: a zero field takes the default (80
// columns, 24 rows), anything above 4096 is refused.
func size(ps *raydv1.PtySize) (cols, rows uint16, err error) {
	c, r := ps.GetCols(), ps.GetRows()
	if c > launch.MaxPTYSize || r > launch.MaxPTYSize {
		return 0, 0, rpcerr.Invalid("size out of range: 1..4096 columns and rows")
	}
	if c == 0 {
		c = proc.DefaultPTYCols
	}
	if r == 0 {
		r = proc.DefaultPTYRows
	}
	return uint16(c), uint16(r), nil
}
