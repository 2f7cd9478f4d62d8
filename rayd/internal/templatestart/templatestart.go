// Package templatestart runs a template's start command and tells when
// the sandbox is ready for it.
//
// A template (proto/template.Runtime, read from RuntimePath) may name a
// start command and a ready port. rayd starts the command once /run has
// installed the sandbox's configuration, as the sandbox's default user in
// its directory with its environment (the template's defaults under the
// payload's), like any process a client starts: it shows in the process
// list with the tag "template-start" and ends with the sandbox. Until
// something listens on the ready port on loopback, Ready is false (Health
// agent_ready false, so the SDK's Create waits); after MaxWait, or once
// the command has exited, Ready is true whatever the port says, and the
// log says why (never the command).
package templatestart

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Tag is the start command's process tag.
const Tag = "template-start"

// MaxWait is how long the ready port may keep the sandbox not ready.
const MaxWait = 300 * time.Second

// ErrConfig is wrapped by Load's errors about the file's content.
var ErrConfig = errors.New("template configuration rejected")

// Load reads the template configuration at path: nil and no error when
// there is none. The file must be a regular file of at most
// ptemplate.MaxSpecLen bytes.
func Load(path string) (*ptemplate.Runtime, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot open it", ErrConfig)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > ptemplate.MaxSpecLen {
		return nil, fmt.Errorf("%w: not a regular file of at most %d bytes", ErrConfig, ptemplate.MaxSpecLen)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("%w: cannot read it", ErrConfig)
	}
	rt, err := ptemplate.DecodeRuntime(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return rt, nil
}

// Starter starts one template's command.
type Starter struct {
	rt      *ptemplate.Runtime
	sup     *proc.Supervisor
	builder *launch.Builder
	log     *slog.Logger
	now     func() time.Time
	dial    func(addr string) bool

	once    sync.Once
	started atomic.Int64 // unix nanos of the start; 0: not started
	ready   atomic.Bool
	exited  atomic.Bool
}

// New returns a Starter of rt (nil: nothing to start; Ready is true).
func New(rt *ptemplate.Runtime, sup *proc.Supervisor, builder *launch.Builder, log *slog.Logger) *Starter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Starter{rt: rt, sup: sup, builder: builder, log: log, now: time.Now, dial: dialLoopback}
	if rt == nil || rt.Start == nil || rt.Start.ReadyPort == 0 {
		s.ready.Store(true)
	}
	return s
}

// Enabled reports whether the template has a start command.
func (s *Starter) Enabled() bool { return s.rt != nil && s.rt.Start != nil }

// Start starts the command for boot, once. A command that cannot start is
// logged (its class) and the sandbox is ready without it.
func (s *Starter) Start(boot *sandbox.Boot) {
	if !s.Enabled() || boot == nil {
		return
	}
	s.once.Do(func() {
		s.started.Store(s.now().UnixNano())
		tag := Tag
		args := []string{"-c", s.rt.Start.Cmd}
		spec, err := s.builder.Spec(boot, launch.Request{Cmd: "/bin/sh", Args: args, Tag: &tag})
		if err == nil {
			// Listed like a client's process (ProcessService.List).
			spec.Config = &raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "/bin/sh", Args: args}, Tag: &tag}
			var p *proc.Process
			if p, err = s.sup.Start(spec); err == nil {
				s.log.Info("template start command started", "template", s.rt.Name, "pid", p.Pid())
				go func() {
					<-p.Done()
					s.exited.Store(true)
					if !s.ready.Load() {
						s.log.Warn("template start command exited before its ready port listened", "template", s.rt.Name)
					}
				}()
				return
			}
		}
		s.exited.Store(true)
		why := "start_failed"
		var le *launch.Error
		if errors.As(err, &le) {
			why = le.PublicMessage() // fixed texts, never the command
		}
		s.log.Warn("template start command did not start", "template", s.rt.Name, "reason", why)
	})
}

// Ready reports whether the sandbox is ready as far as the start command
// goes: no ready port, the port listens, the command ended, or MaxWait
// passed since it started.
func (s *Starter) Ready() bool {
	if s.ready.Load() {
		return true
	}
	at := s.started.Load()
	if at == 0 {
		return false
	}
	switch {
	case s.dial(net.JoinHostPort("127.0.0.1", strconv.Itoa(s.rt.Start.ReadyPort))):
	case s.exited.Load():
	case s.now().Sub(time.Unix(0, at)) >= MaxWait:
		s.log.Warn("template ready port did not listen in time: ready anyway", "template", s.rt.Name, "port", s.rt.Start.ReadyPort)
	default:
		return false
	}
	s.ready.Store(true)
	return true
}

func dialLoopback(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
