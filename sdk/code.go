package rayito

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// MaxCodeBytes is the largest cell RunCode sends (rayd's limit).
const MaxCodeBytes = 1 << 20

// ErrKernelDied: the kernel running the cell died (killed, out of memory);
// the cell's output so far is in the Execution RunCode returns with it.
var ErrKernelDied = errors.New("rayito: kernel died")

// Interpreter runs code in the sandbox's stateful interpreter (Sandbox.Code): Jupyter kernels
// that rayd drives, one per context, whose variables persist from one cell
// to the next. Each language has a default context ("default-python",
// ...), created on first use and never removed (Python's, and
// JavaScript's when its kernel is installed, are listed from the start;
// their kernels start on first use); CreateContext makes more (at most 8
// in all).
type Interpreter struct{ sbx *Sandbox }

// CodeOption configures RunCode (and Interpreter.Run) or CreateContext.
type CodeOption interface{ applyCode(*codeConfig) }

type codeConfig struct {
	contextID string
	language  string
	timeout   time.Duration
	envs      map[string]string
	cwd       *string
	onStdout  func([]byte)
	onStderr  func([]byte)
	onResult  func(Result)

	callExts // the extensions' values (sdk/secrets' WithSecrets)
}

type codeOption func(*codeConfig)

func (f codeOption) applyCode(c *codeConfig) { f(c) }

func codeOpts(opts []CodeOption) *codeConfig {
	c := &codeConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyCode(c)
		}
	}
	return c
}

// InContext runs the code in the context id (from CreateContext or
// Contexts) instead of its language's default context.
func InContext(id string) CodeOption { return codeOption(func(c *codeConfig) { c.contextID = id }) }

// WithLanguage picks the language: for RunCode its default context
// ("python" unless said; others need their kernel in the sandbox's image),
// for CreateContext the new context's.
func WithLanguage(language string) CodeOption {
	return codeOption(func(c *codeConfig) { c.language = language })
}

// OnResult is called with each result of a cell (rich display data and the
// cell's value), in order.
func OnResult(f func(Result)) CodeOption { return codeOption(func(c *codeConfig) { c.onResult = f }) }

// Result is one rich result of a cell: the value of its last expression
// (IsMain) or something it displayed. Each field holds one MIME type of
// the kernel's bundle; the binary ones are decoded.
type Result struct {
	IsMain     bool
	Text       string // text/plain
	HTML       string // text/html
	Markdown   string // text/markdown
	LaTeX      string // text/latex
	JSON       string // application/json, as JSON text
	JavaScript string // application/javascript
	SVG        string // image/svg+xml
	PNG        []byte // image/png
	JPEG       []byte // image/jpeg
	PDF        []byte // application/pdf
	Chart      string // a chart's data, as JSON text
	Data       string
	// Extra holds MIME types without a field, by type.
	Extra map[string]string
}

// Logs are what a cell printed, in pieces as they arrived.
type Logs struct {
	Stdout []string
	Stderr []string
}

// ExecutionError is the exception a cell raised.
type ExecutionError struct {
	Name      string // e.g. "ZeroDivisionError"
	Value     string // e.g. "division by zero"
	Traceback string
}

func (e *ExecutionError) Error() string {
	if e.Value == "" {
		return "code raised " + e.Name
	}
	return "code raised " + e.Name + ": " + e.Value
}

// Execution is a finished cell. A cell that raised has Error set: that is
// a result, not a Go error (RunCode's error is for what kept the cell from
// running or finishing).
type Execution struct {
	ID      string
	Count   int // the kernel's execution count
	Results []Result
	Logs    Logs
	Error   *ExecutionError
	// TimedOut says the cell ran past WithTimeout and was interrupted;
	// KernelRestarted that the kernel did not stop and was restarted
	// (the context's state is lost).
	TimedOut        bool
	KernelRestarted bool
	Duration        time.Duration
}

// Text returns the text of the main result (the value of the cell's last
// expression), or "".
func (e *Execution) Text() string {
	if r := e.Main(); r != nil {
		return r.Text
	}
	return ""
}

// Main returns the main result, or nil.
func (e *Execution) Main() *Result {
	for i := range e.Results {
		if e.Results[i].IsMain {
			return &e.Results[i]
		}
	}
	return nil
}

// PNGs returns every PNG image the cell produced, in order.
func (e *Execution) PNGs() [][]byte {
	var out [][]byte
	for _, r := range e.Results {
		if len(r.PNG) > 0 {
			out = append(out, r.PNG)
		}
	}
	return out
}

// RunCode runs code in the sandbox's interpreter (see Interpreter.Run).
func (s *Sandbox) RunCode(ctx context.Context, code string, opts ...CodeOption) (_ *Execution, err error) {
	ctx, sp := s.span(ctx, "RunCode")
	defer func() { sp.end(err) }()
	return s.Code.Run(ctx, code, opts...)
}

// codeShape reads CodeService streams: every event but keepalives carries
// a seq; the end, a timeout or a stream error ends it.
var codeShape = follow.Shape[raydv1.ExecuteEvent]{
	Seq: func(m *raydv1.ExecuteEvent) (uint64, bool) {
		return m.GetSeq(), m.GetSeq() > 0 && m.GetKeepalive() == nil
	},
	End: func(m *raydv1.ExecuteEvent) bool {
		return m.GetEnd() != nil || m.GetStreamError() != nil
	},
	Keepalive: func(m *raydv1.ExecuteEvent) bool { return m.GetKeepalive() != nil },
}

// Run runs code (at most MaxCodeBytes) in a context of the interpreter,
// by default its language's default context, and returns the finished
// cell. OnStdout, OnStderr and OnResult see its output as it comes.
// WithTimeout interrupts the cell after d (Execution.TimedOut). When the
// connection drops or the sandbox is paused, Run reattaches and loses
// nothing, like a command's handle (rayd keeps a dropped cell running
// for 60 s for it); cancelling ctx interrupts the cell.
func (c *Interpreter) Run(ctx context.Context, code string, opts ...CodeOption) (*Execution, error) {
	if len(code) > MaxCodeBytes {
		return nil, fmt.Errorf("%w: code of %d bytes (at most %d)", ErrInvalidArgument, len(code), MaxCodeBytes)
	}
	cc := codeOpts(opts)
	envs, err := c.sbx.extensionEnvs(ctx, cc.envs, cc.exts)
	if err != nil {
		return nil, err
	}
	req := &raydv1.ExecuteRequest{Code: code, Envs: envs}
	if cc.contextID != "" {
		if cc.language != "" {
			return nil, fmt.Errorf("%w: InContext and WithLanguage together", ErrInvalidArgument)
		}
		req.ContextId = &cc.contextID
	} else if cc.language != "" {
		req.Language = &cc.language
	}
	if cc.timeout > 0 {
		req.TimeoutMs = uint64(cc.timeout / time.Millisecond)
	}
	stream, err := c.sbx.dp.code.Execute(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr("run code", err)
	}
	first, err := follow.Open(stream)
	if err != nil {
		return nil, rpcErr("run code", err)
	}
	st := first.GetStarted()
	if st == nil {
		stream.Close()
		return nil, rpcErr("run code", errors.New("stream did not open with started"))
	}
	ex := &Execution{ID: st.GetExecutionId(), Count: int(st.GetExecutionCount())}
	contextID := cc.contextID
	if contextID == "" {
		contextID = "default-" + defaultLanguage(cc.language)
	}
	var mu sync.Mutex
	fol := &follow.Follower[raydv1.ExecuteEvent]{
		Shape: codeShape,
		Env:   c.sbx.followEnv("run code"),
		Attach: func(ctx context.Context, from uint64) (*connect.ServerStreamForClient[raydv1.ExecuteEvent], error) {
			return c.sbx.dp.code.Reattach(ctx, connect.NewRequest(&raydv1.ReattachRequest{ContextId: contextID, ExecutionId: ex.ID, FromSeq: from}))
		},
		OnData: func(m *raydv1.ExecuteEvent) {
			mu.Lock()
			defer mu.Unlock()
			ex.apply(m, cc)
		},
	}
	if seq := first.GetSeq(); seq > 0 {
		fol.SetLast(seq)
	}
	last, err := fol.Run(ctx, stream)
	if err != nil {
		if ctx.Err() != nil {
			c.interrupt(ctx, contextID, ex.ID)
		}
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if se := last.GetStreamError(); se != nil {
		if se.GetCode() == "kernel_died" {
			return ex, fmt.Errorf("%w while running the cell: the context's state is lost, and its kernel restarts on the next cell", ErrKernelDied)
		}
		return ex, fmt.Errorf("rayito: run code: the stream ended with %s", se.GetCode())
	}
	ex.Duration = time.Duration(last.GetEnd().GetDurationMs()) * time.Millisecond
	return ex, nil
}

// interruptTimeout bounds the Interrupt sent after a cancel.
const interruptTimeout = 5 * time.Second

// interrupt asks rayd to interrupt the execution whose caller cancelled
// ctx (rayd cannot tell a cancel from a dropped connection, and leaves a
// dropped cell running for a while). Best effort: the cancel has
// happened already, whatever the answer (an older rayd without the RPC,
// a sandbox that went away).
func (c *Interpreter) interrupt(ctx context.Context, contextID, executionID string) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
	defer cancel()
	_, _ = c.sbx.dp.code.Interrupt(ictx, connect.NewRequest(&raydv1.InterruptRequest{ContextId: contextID, ExecutionId: executionID}))
}

// apply records one event of the cell (the caller holds the lock).
func (ex *Execution) apply(m *raydv1.ExecuteEvent, cc *codeConfig) {
	switch ev := m.Event.(type) {
	case *raydv1.ExecuteEvent_Stdout:
		ex.Logs.Stdout = append(ex.Logs.Stdout, ev.Stdout.GetText())
		if cc.onStdout != nil {
			cc.onStdout([]byte(ev.Stdout.GetText()))
		}
	case *raydv1.ExecuteEvent_Stderr:
		ex.Logs.Stderr = append(ex.Logs.Stderr, ev.Stderr.GetText())
		if cc.onStderr != nil {
			cc.onStderr([]byte(ev.Stderr.GetText()))
		}
	case *raydv1.ExecuteEvent_Result:
		r := resultOf(ev.Result)
		ex.Results = append(ex.Results, r)
		if cc.onResult != nil {
			cc.onResult(r)
		}
	case *raydv1.ExecuteEvent_Error:
		ex.Error = &ExecutionError{Name: ev.Error.GetName(), Value: ev.Error.GetValue(), Traceback: ev.Error.GetTraceback()}
	case *raydv1.ExecuteEvent_Timeout:
		ex.TimedOut, ex.KernelRestarted = true, ev.Timeout.GetKernelRestarted()
	case *raydv1.ExecuteEvent_Started:
		ex.ID, ex.Count = ev.Started.GetExecutionId(), int(ev.Started.GetExecutionCount())
	}
}

func resultOf(r *raydv1.ExecutionResult) Result {
	decode := func(s string) []byte {
		if s == "" {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return []byte(s)
		}
		return b
	}
	out := Result{
		IsMain: r.GetIsMainResult(), Text: r.GetText(), HTML: r.GetHtml(), Markdown: r.GetMarkdown(),
		LaTeX: r.GetLatex(), JSON: r.GetJson(), JavaScript: r.GetJavascript(), SVG: r.GetSvg(),
		PNG: decode(r.GetPng()), JPEG: decode(r.GetJpeg()), PDF: decode(r.GetPdf()),
		Chart: r.GetChart(), Data: r.GetData(),
	}
	if len(r.GetExtra()) > 0 {
		out.Extra = make(map[string]string, len(r.GetExtra()))
		for k, v := range r.GetExtra() {
			out.Extra[k] = v
		}
	}
	return out
}

func defaultLanguage(l string) string {
	if l == "" {
		return "python"
	}
	return l
}

// CodeContext is one context of the interpreter: a kernel of its own.
type CodeContext struct {
	ID       string
	Language string
	Cwd      string
}

// CreateContext starts a new context (a kernel of its own, whose state no
// other context shares): WithLanguage (default python), WithCwd, WithEnvs.
func (c *Interpreter) CreateContext(ctx context.Context, opts ...CodeOption) (*CodeContext, error) {
	cc := codeOpts(opts)
	envs, err := c.sbx.extensionEnvs(ctx, cc.envs, cc.exts)
	if err != nil {
		return nil, err
	}
	resp, err := c.sbx.dp.code.CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: cc.language, Cwd: cc.cwd, Envs: envs}))
	if err != nil {
		return nil, rpcErr("create context", err)
	}
	return contextOf(resp.Msg.GetContext()), nil
}

func contextOf(c *raydv1.CodeContext) *CodeContext {
	return &CodeContext{ID: c.GetContextId(), Language: c.GetLanguage(), Cwd: c.GetCwd()}
}

// Contexts lists the contexts: the default ones listed from the start
// first, then the others in the order they were made, each with its
// working directory.
func (c *Interpreter) Contexts(ctx context.Context) ([]CodeContext, error) {
	resp, err := c.sbx.dp.code.ListContexts(ctx, connect.NewRequest(&raydv1.ListContextsRequest{}))
	if err != nil {
		return nil, rpcErr("list contexts", err)
	}
	out := make([]CodeContext, 0, len(resp.Msg.GetContexts()))
	for _, x := range resp.Msg.GetContexts() {
		out = append(out, *contextOf(x))
	}
	return out, nil
}

// RestartContext restarts a context's kernel: its state is lost, its id
// stays.
func (c *Interpreter) RestartContext(ctx context.Context, id string) error {
	if _, err := c.sbx.dp.code.RestartContext(ctx, connect.NewRequest(&raydv1.RestartContextRequest{ContextId: id})); err != nil {
		return rpcErr("restart context", err)
	}
	return nil
}

// RemoveContext ends a context and its kernel. A language's default
// context cannot be removed.
func (c *Interpreter) RemoveContext(ctx context.Context, id string) error {
	if _, err := c.sbx.dp.code.DestroyContext(ctx, connect.NewRequest(&raydv1.DestroyContextRequest{ContextId: id})); err != nil {
		return rpcErr("remove context", err)
	}
	return nil
}
