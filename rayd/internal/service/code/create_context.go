package code

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// CreateContext starts a kernel for a new context. The kernel runs as the
// sandbox's default user with the process rules (identity, environment,
// rlimits, process cap); envs go into its environment.
func (s *Service) CreateContext(ctx context.Context, req *connect.Request[raydv1.CreateContextRequest]) (*connect.Response[raydv1.CreateContextResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	m := req.Msg
	language, ok := normLanguage(m.GetLanguage())
	if !ok {
		return nil, rpcerr.Invalid(languagesText)
	}
	if err := validEnvs(m.GetEnvs()); err != nil {
		return nil, err
	}
	if m.Cwd != nil && (*m.Cwd == "" || strings.ContainsRune(*m.Cwd, 0)) {
		return nil, rpcerr.Invalid("invalid cwd")
	}
	// Refuse a missing language before taking a slot.
	if _, err := s.kernelArgv(ctx, language); err != nil {
		return nil, rpcerr.From(err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, rpcerr.From(jupyter.ErrClosed)
	}
	if len(s.contexts) >= MaxContexts {
		s.mu.Unlock()
		return nil, rpcerr.From(jupyter.ErrTooManyContexts)
	}
	cc := newContext(s, "ctx-"+randomHex(8), language, m.Cwd, m.GetEnvs())
	s.contexts[cc.id] = cc
	s.mu.Unlock()
	if _, err := cc.ensureKernel(ctx); err != nil {
		s.remove(cc)
		cc.destroy()
		return nil, rpcerr.From(err)
	}
	s.log.Info("code context created", "context_id", cc.id, "language", language, "envs", len(m.GetEnvs()))
	return connect.NewResponse(&raydv1.CreateContextResponse{Context: cc.info()}), nil
}

// validEnvs checks environment variable names and values (the launch rules
// check them again when the kernel starts).
func validEnvs(envs map[string]string) error {
	if len(envs) > 1024 {
		return rpcerr.Invalid("too many envs")
	}
	for k, v := range envs {
		if !validEnvName(k) || strings.ContainsRune(v, 0) || len(v) > 128<<10 {
			return rpcerr.Invalid("invalid environment variable")
		}
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
