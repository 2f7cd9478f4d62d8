package code

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Execute runs a cell and streams its events: started first, then
// stdout/stderr, results and error in kernel order, then end (or
// timeout then end; or stream_error alone when the kernel died). The cell
// runs on when the stream is cut by /suspend or dropped (Reattach follows
// it again; see stream for how long a dropped one waits); Interrupt stops
// it. Executions of one context queue.
func (s *Service) Execute(ctx context.Context, req *connect.Request[raydv1.ExecuteRequest], stream *connect.ServerStream[raydv1.ExecuteEvent]) error {
	return s.ExecuteTo(ctx, req.Msg, ExecuteOptions{}, stream.Send)
}

// ExecuteOptions change how ExecuteTo treats its stream.
type ExecuteOptions struct {
	// InterruptOnDrop interrupts the cell as soon as its stream ends
	// before it does (the client went away, timed out, or the stream was
	// cut by /suspend), unless another follower is on it: the semantics
	// of E2B's code interpreter, whose clients cannot reattach. Without
	// it the cell runs on for Reattach (see stream).
	InterruptOnDrop bool
}

// ExecuteTo is Execute over a send function: the E2B code-interpreter
// endpoint (service/envdcode) shares it. An error returned before the
// first send is the call's refusal.
func (s *Service) ExecuteTo(ctx context.Context, m *raydv1.ExecuteRequest, opts ExecuteOptions, send func(*raydv1.ExecuteEvent) error) error {
	if _, err := s.boot(); err != nil {
		return err
	}
	if len(m.GetCode()) > MaxCodeBytes {
		return rpcerr.Invalid("code is larger than 1 MiB")
	}
	if err := validEnvs(m.GetEnvs()); err != nil {
		return err
	}
	if m.GetTimeoutMs() > uint64(7*24*time.Hour/time.Millisecond) {
		return rpcerr.Invalid("timeout_ms out of range")
	}
	cc, err := s.resolve(ctx, m)
	if err != nil {
		return err
	}
	if len(m.GetEnvs()) > 0 && cc.language != "python" {
		return rpcerr.Invalid("per-execution envs are only supported in Python contexts")
	}
	select {
	case cc.slot <- struct{}{}:
	case <-ctx.Done():
		return rpcerr.From(ctx.Err())
	}
	k, err := cc.ensureKernel(ctx)
	if err != nil {
		<-cc.slot
		return rpcerr.From(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e := newExecution(s.newExecutionID(), cancel)
	cc.addExecution(e)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.run(runCtx, cc, k, e, m)
		cancel()
		cc.endExecution(e)
		<-cc.slot
	}()
	return s.stream(ctx, e, 0, opts, send)
}

// resolve finds the context of an Execute: context_id, or the default
// context of language (python when neither is set).
func (s *Service) resolve(ctx context.Context, m *raydv1.ExecuteRequest) (*codeContext, error) {
	if m.ContextId != nil && m.Language != nil {
		return nil, rpcerr.Invalid("language and context_id exclude each other")
	}
	if id := m.GetContextId(); id != "" {
		cc, err := s.context(id)
		if err != nil {
			l, ok := defaultLanguage(id)
			if !ok {
				return nil, rpcerr.From(err)
			}
			if cc, err = s.defaultContextFor(ctx, l); err != nil {
				return nil, err
			}
		}
		return cc, nil
	}
	l, ok := normLanguage(m.GetLanguage())
	if !ok {
		return nil, rpcerr.Invalid(languagesText)
	}
	return s.defaultContextFor(ctx, l)
}

// defaultContextFor is defaultContext after checking that the language's
// kernel is installed.
func (s *Service) defaultContextFor(ctx context.Context, language string) (*codeContext, error) {
	if _, err := s.kernelArgv(ctx, language); err != nil {
		return nil, rpcerr.From(err)
	}
	cc, err := s.defaultContext(language)
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return cc, nil
}

// stream follows e from fromSeq onto send with keepalives (for Execute and
// Reattach alike).
//
// rayd cannot tell a client that cancelled from a connection that dropped:
// both just end the request. So a stream that ends before the execution
// does leaves the cell running: cut by /suspend, it waits for the resume;
// otherwise, when nobody follows it again within detachGrace (the SDK's
// reconnect budget), it is interrupted, so an abandoned cell does not hold
// its context. Clients that mean to stop a cell call Interrupt (the SDK
// does when its context is cancelled). With opts.InterruptOnDrop (E2B's
// clients, which never reattach) any early end interrupts the cell at
// once, unless someone else follows it.
func (s *Service) stream(ctx context.Context, e *execution, fromSeq uint64, opts ExecuteOptions, send func(*raydv1.ExecuteEvent) error) error {
	ka := keepalive.Start(keepaliveAfter, send, func() *raydv1.ExecuteEvent {
		return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer ka.Stop()
	if err := e.follow(ctx, fromSeq, ka.Send); err != nil {
		switch {
		case opts.InterruptOnDrop:
			e.detached(0)
		case !errors.Is(context.Cause(ctx), quiesce.ErrSuspending):
			e.detached(s.opts.DetachGrace)
		}
		if ctx.Err() != nil {
			return rpcerr.From(ctx.Err())
		}
		return rpcerr.From(err)
	}
	return nil
}

func streamError(code, msg string) *raydv1.ExecuteEvent {
	return &raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_StreamError{StreamError: &raydv1.StreamError{Code: code, Message: msg}}}
}

// run executes the cell and records its events in e.
func (s *Service) run(runCtx context.Context, cc *codeContext, k *jupyter.Kernel, e *execution, m *raydv1.ExecuteRequest) {
	start := time.Now()
	started := false
	emitStarted := func(count int) {
		if !started {
			started = true
			e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Started{Started: &raydv1.ExecutionStarted{ExecutionId: e.id, ExecutionCount: uint32(max(count, 0))}}}, false)
		}
	}
	execCtx := runCtx
	if ms := m.GetTimeoutMs(); ms > 0 {
		var cancel context.CancelFunc
		execCtx, cancel = context.WithTimeout(runCtx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	envs := m.GetEnvs()
	if len(envs) > 0 {
		if _, err := k.Execute(runCtx, envSetCode(envs), true, func(jupyter.Output) {}); err != nil {
			emitStarted(0)
			e.add(s.lostEvent(err), true)
			return
		}
	}
	timedOut := func() bool { return execCtx.Err() != nil && runCtx.Err() == nil }
	out, err := k.Execute(execCtx, m.GetCode(), false, func(o jupyter.Output) {
		if o.Kind == "started" {
			emitStarted(o.Count)
			return
		}
		if o.Kind == "error" && timedOut() {
			// The KeyboardInterrupt of the timeout: the timeout event
			// says it.
			return
		}
		if ev := eventOf(o, time.Now()); ev != nil {
			emitStarted(0)
			e.add(ev, false)
		}
	})
	emitStarted(out.Count)
	if err != nil {
		e.add(s.lostEvent(err), true)
		return
	}
	restarted := false
	if out.Stuck {
		// Not idle within the grace after SIGINT: restart it.
		rctx, cancel := context.WithTimeout(context.Background(), jupyter.DefaultStartTimeout)
		restarted = cc.restart(rctx) == nil
		cancel()
		s.log.Info("kernel restarted after an interrupt", "context_id", cc.id, "execution_id", e.id, "ok", restarted)
	}
	if len(envs) > 0 && !out.Stuck {
		_, _ = k.Execute(context.Background(), envRestoreCode, true, func(jupyter.Output) {})
	}
	if out.Interrupted && !out.Stuck {
		// A SIGINT that reached the kernel just as the cell was ending
		// can abort the next request instead: a silent cell takes it, not
		// the user's next one.
		actx, cancel := context.WithTimeout(context.Background(), absorbTimeout)
		_, _ = k.Execute(actx, "pass", true, func(jupyter.Output) {})
		cancel()
	}
	if out.Interrupted && timedOut() {
		e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_Timeout{Timeout: &raydv1.ExecutionTimeout{KernelRestarted: restarted}}}, false)
	}
	e.add(&raydv1.ExecuteEvent{Event: &raydv1.ExecuteEvent_End{End: &raydv1.ExecutionEnd{DurationMs: uint64(time.Since(start).Milliseconds())}}}, true)
	s.log.Debug("execution ended", "context_id", cc.id, "execution_id", e.id, "took_ms", time.Since(start).Milliseconds(), "interrupted", out.Interrupted)
}

// absorbTimeout bounds the silent cell after an interrupt.
const absorbTimeout = 5 * time.Second

// lostEvent is the terminal stream_error of an execution whose kernel died
// or was closed under it.
func (s *Service) lostEvent(err error) *raydv1.ExecuteEvent {
	if errors.Is(err, jupyter.ErrDied) {
		return streamError("kernel_died", "the kernel died; the context restarts it on its next use")
	}
	if errors.Is(err, jupyter.ErrClosed) {
		return streamError("cancelled", "the context was restarted or destroyed")
	}
	return streamError("internal", "the kernel failed")
}

// envSetCode saves the current values of envs' names and sets envs in the
// kernel's os.environ.
func envSetCode(envs map[string]string) string {
	b, _ := json.Marshal(envs)
	lit, _ := json.Marshal(string(b)) // a JSON string is a valid Python literal
	return "import os as _rayito_os, json as _rayito_json\n" +
		"_rayito_env_new = _rayito_json.loads(" + string(lit) + ")\n" +
		"_rayito_env_saved = {k: _rayito_os.environ.get(k) for k in _rayito_env_new}\n" +
		"_rayito_os.environ.update(_rayito_env_new)\n" +
		"del _rayito_os, _rayito_json, _rayito_env_new\n"
}

// envRestoreCode restores what envSetCode saved.
const envRestoreCode = "import os as _rayito_os\n" +
	"for _rayito_k, _rayito_v in globals().pop('_rayito_env_saved', {}).items():\n" +
	"    if _rayito_v is None:\n" +
	"        _rayito_os.environ.pop(_rayito_k, None)\n" +
	"    else:\n" +
	"        _rayito_os.environ[_rayito_k] = _rayito_v\n" +
	"globals().pop('_rayito_k', None); globals().pop('_rayito_v', None)\n" +
	"del _rayito_os\n"
