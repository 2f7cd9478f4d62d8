// Package envdprocess serves E2B envd's process.Process service (the E2B
// shim's envd port) over rayd's own process machinery: the same
// supervisor, launch rules (identity, environment, cwd) and output
// streaming (package outstream) as ProcessService and PtyService, only in
// E2B's shapes. One file per RPC.
//
// Differences from ProcessService, all E2B's: the user comes from
// `Authorization: Basic base64("<user>:")` (default: the sandbox's
// default user); Connect-Timeout-Ms (the handler's deadline) is the
// process's lifetime, so the process is killed when it runs out but not
// when the client goes away; keepalives follow Keepalive-Ping-Interval;
// the end event reports a signal as exit code -1 and "signal: <name>";
// a kill of an unknown or ended pid is not_found.
package envdprocess

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/proto/gen/envd/process/processconnect"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/envduser"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/outstream"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Service implements processconnect.ProcessHandler.
type Service struct {
	state   *sandbox.State
	sup     *proc.Supervisor
	builder *launch.Builder
	log     *slog.Logger
}

var _ processconnect.ProcessHandler = (*Service)(nil)

// New returns the service.
func New(state *sandbox.State, sup *proc.Supervisor, builder *launch.Builder, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{state: state, sup: sup, builder: builder, log: log}
}

// KeepaliveHeader is the request header giving the keepalive interval in
// seconds.
const KeepaliveHeader = "Keepalive-Ping-Interval"

// maxKeepalive bounds Keepalive-Ping-Interval.
const maxKeepalive = time.Hour

// maxLifetime bounds the lifetime a deadline gives a process (launch's
// own cap on timeouts).
const maxLifetime = 7 * 24 * time.Hour

// boot returns the installed configuration. The auth gate already refused
// calls before /run.
func (s *Service) boot() (*sandbox.Boot, error) {
	if b := s.state.Boot(); b != nil {
		return b, nil
	}
	return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
}

// user reads the run-as user of the request.
func user(h http.Header) (string, error) {
	u, err := envduser.FromHeader(h)
	if err != nil {
		return "", rpcerr.Invalid("invalid Authorization header: expected Basic credentials naming a user")
	}
	return u, nil
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds); 0 (absent or
// invalid) means outstream's default.
func keepaliveInterval(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get(KeepaliveHeader))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxKeepalive)
}

// lifetime is the process lifetime the call's deadline (Connect-Timeout-Ms)
// gives, or 0 for none.
func lifetime(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return min(max(time.Until(dl), time.Millisecond), maxLifetime)
}

// lookup finds the process a selector names: by pid (live or recently
// ended) or by tag (live).
func (s *Service) lookup(sel *process.ProcessSelector) (*proc.Process, error) {
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		p, err := s.sup.Get(int(v.Pid))
		if err != nil {
			return nil, rpcerr.EnvdProcess(err, v.Pid)
		}
		return p, nil
	case *process.ProcessSelector_Tag:
		for _, p := range s.sup.List() {
			if t := p.Spec().Tag; t != "" && t == v.Tag {
				return p, nil
			}
		}
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("process with tag %s not found", v.Tag))
	}
	return nil, rpcerr.Invalid("process selector is required (pid or tag)")
}

// live finds a selected process that has not ended: an ended one is
// not_found, as on envd.
func (s *Service) live(sel *process.ProcessSelector) (*proc.Process, error) {
	p, err := s.lookup(sel)
	if err != nil {
		return nil, err
	}
	if _, ended := p.Exit(); ended {
		return nil, rpcerr.EnvdProcess(proc.ErrProcessEnded, uint32(p.Pid()))
	}
	return p, nil
}

// info renders a process for List: every entry has its config.
func info(p *proc.Process) *process.ProcessInfo {
	spec := p.Spec()
	pi := &process.ProcessInfo{Pid: uint32(p.Pid())}
	switch req := spec.Config.(type) {
	case *process.StartRequest:
		pi.Config = req.GetProcess()
	case *raydv1.StartRequest:
		c := req.GetProcess()
		pi.Config = &process.ProcessConfig{Cmd: c.GetCmd(), Args: c.GetArgs(), Envs: c.GetEnvs(), Cwd: c.Cwd}
	case *raydv1.PtyStart:
		pi.Config = &process.ProcessConfig{Cmd: spec.Path, Envs: req.GetEnvs(), Cwd: req.Cwd}
	}
	if pi.Config == nil {
		pi.Config = &process.ProcessConfig{Cmd: spec.Path}
		if len(spec.Args) > 1 {
			pi.Config.Args = spec.Args[1:]
		}
	}
	if pi.Config.Cwd == nil && spec.Dir != "" {
		dir := spec.Dir
		pi.Config = cloneConfig(pi.Config)
		pi.Config.Cwd = &dir
	}
	if spec.Tag != "" {
		t := spec.Tag
		pi.Tag = &t
	}
	return pi
}

// cloneConfig copies a config kept in a process's Spec (never modified).
func cloneConfig(c *process.ProcessConfig) *process.ProcessConfig {
	return &process.ProcessConfig{Cmd: c.GetCmd(), Args: c.GetArgs(), Envs: c.GetEnvs(), Cwd: c.Cwd}
}

// truncated stands for the end of a subscriber cut for falling behind:
// the stream then ends with an error instead of an end event (the
// process may still run).
var truncated = &process.ProcessEvent{}

// errTruncated ends a stream whose subscriber was cut.
func errTruncated() error {
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "the stream fell too far behind the process's output and was cut; reattach with Connect")
}

// shape renders E2B's ProcessEvent. A PTY's output is data.pty.
func shape(kind proc.Kind, interval time.Duration) outstream.Shape[process.ProcessEvent] {
	return outstream.Shape[process.ProcessEvent]{
		Interval: interval,
		Open: func(pid int) *process.ProcessEvent {
			return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(pid)}}}
		},
		Keepalive: func() *process.ProcessEvent {
			return &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
		},
		Data: func(ev proc.Event) *process.ProcessEvent {
			d := &process.ProcessEvent_DataEvent{}
			switch {
			case kind == proc.KindPTY:
				d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: ev.Data}
			case ev.Stream == proc.Stderr:
				d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: ev.Data}
			default:
				d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: ev.Data}
			}
			return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}
		},
		End: func(end *raydv1.EndEvent) *process.ProcessEvent {
			if end.GetStatus() == "output_truncated" {
				return truncated
			}
			return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(end)}}
		},
	}
}

// endEvent renders an exit as envd does (Go's os.ProcessState): a normal
// exit is "exit status N" (also the error when N is not 0); a death by
// signal is exit code -1 with "signal: <name>" as status and error.
func endEvent(e *raydv1.EndEvent) *process.ProcessEvent_EndEvent {
	if e.GetExited() {
		status := fmt.Sprintf("exit status %d", e.GetExitCode())
		out := &process.ProcessEvent_EndEvent{ExitCode: e.GetExitCode(), Exited: true, Status: status}
		if e.GetExitCode() != 0 {
			out.Error = &status
		}
		return out
	}
	sig := syscall.Signal(e.GetSignal())
	if e.Signal == nil {
		sig = syscall.Signal(max(e.GetExitCode()-128, 0))
	}
	status := "signal: " + sig.String()
	return &process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: status, Error: &status}
}

// pump streams p's events through send (which wraps them in the RPC's
// response message).
func pump(ctx context.Context, p *proc.Process, sub *proc.Subscription, h http.Header, send func(*process.ProcessEvent) error) error {
	return outstream.Pump(ctx, p, sub, func(ev *process.ProcessEvent) error {
		if ev == truncated {
			return errTruncated()
		}
		return send(ev)
	}, shape(p.Kind(), keepaliveInterval(h)))
}
