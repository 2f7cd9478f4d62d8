package code

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Preloading (Options.Preload, -kernel-start preload or eager): most of a
// Python kernel's start is importing ipykernel and IPython (about 0.5 s of
// 0.7 s on 2 cores). A preloaded interpreter does that at boot, before
// /ready (so a snapshot or a pre-booted sandbox holds it), and then waits
// on its stdin, holding nothing unique: no key, no session, no connection
// file. The first Python kernel rayd starts after /run is that
// interpreter, told the kernel's arguments, environment and directory on
// its stdin; it then starts the kernel as a fresh one would (new key,
// new session, random reseeded by the setup cell).
//
// What it costs: one interpreter's memory (about 50 MB RSS, 35 MB of it
// private) from boot until the first cell, in every sandbox, used or not;
// hence not the default. Residual risk: its str hash seed
// (PYTHONHASHSEED) was drawn before /run, so sandboxes cloned from one
// snapshot share it in that first kernel; a lazily started kernel draws
// its own.
//
// It runs as the sandbox user, so that user's code can kill it (the kernel
// then starts afresh) or write to its stdin before rayd does (then the
// kernel it starts is that code's own doing, as uid 1000 already can with
// its own kernels: the residual risk of the package doc).
//
// It is used only when the kernel would run exactly as it does: the same
// identity, and the same values of the variables Python reads once at
// startup (PYTHON*, LANG, LC_*); otherwise it is told to exit and the
// kernel starts from scratch.

// preloadTimeout bounds the preload's import.
const preloadTimeout = 60 * time.Second

// preloadReady is the line the preloaded interpreter prints once loaded.
const preloadReady = "rayd-preload-ready"

// preloadScript imports ipykernel, says so, and waits for one JSON line
// {args, env, cwd}: then it becomes the kernel. EOF makes it exit.
const preloadScript = pythonImport +
	"import json as _json, os as _os\n" +
	"sys.stdout.write('" + preloadReady + "\\n')\n" +
	"sys.stdout.flush()\n" +
	"_line = sys.stdin.readline()\n" +
	"if not _line:\n    _os._exit(0)\n" +
	"_req = _json.loads(_line)\n" +
	"_fd = _os.open(_os.devnull, _os.O_RDONLY)\n" +
	"_os.dup2(_fd, 0)\n" +
	"_os.close(_fd)\n" +
	"_os.environ.clear()\n" +
	"_os.environ.update(_req['env'])\n" +
	"_os.chdir(_req['cwd'])\n" +
	"sys.argv = [sys.argv[0]] + _req['args']\n" +
	"del _json, _os, _line, _req, _fd\n" +
	"kernelapp.launch_new_instance()\n"

// preloaded is one preloaded interpreter.
type preloaded struct {
	p     *proc.Process
	spec  proc.Spec
	ready chan struct{} // closed once loaded (ok) or failed
	ok    bool          // written before ready closes
}

// Preload starts the preloaded interpreter when Options.Preload is set
// (call it once, at boot); it loads in the background. PreloadDone tells
// when it has finished.
func (s *Service) Preload() {
	if !s.opts.Preload {
		return
	}
	pl := &preloaded{ready: s.preReady}
	s.mu.Lock()
	if s.preStarted || s.closed {
		s.mu.Unlock()
		return
	}
	s.preStarted, s.pre = true, pl
	s.mu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer close(pl.ready)
		start := time.Now()
		err := s.startPreload(pl)
		if err != nil {
			s.log.Warn("kernel preload failed", "err_class", errClass(err))
			pl.discard()
			return
		}
		pl.ok = true
		s.log.Info("kernel preloaded", "pid", pl.p.Pid(), "took_ms", time.Since(start).Milliseconds())
	}()
}

// startPreload starts the interpreter as the default user, with the boot
// environment, and waits for its ready line.
func (s *Service) startPreload(pl *preloaded) error {
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	py, err := s.findPython(ctx)
	if err != nil {
		return err
	}
	tag := "rayd:kernel-preload"
	spec, err := s.opts.Builder.Spec(&sandbox.Boot{User: limits.DefaultUser}, launch.Request{Cmd: py, Args: []string{"-c", preloadScript}, Stdin: true, Tag: &tag})
	if err != nil {
		return err
	}
	pl.spec = spec
	if pl.p, err = s.opts.Supervisor.Start(spec); err != nil {
		return err
	}
	sub, err := pl.p.Subscribe(0)
	if err != nil {
		return err
	}
	defer sub.Close()
	var out []byte
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if ev.Kind != proc.Data {
			return errors.New("the preloaded interpreter exited")
		}
		if ev.Stream == proc.Stdout {
			out = append(out, ev.Data...)
			if strings.Contains(string(out), preloadReady+"\n") {
				return nil
			}
			if len(out) > 4096 {
				return errors.New("the preloaded interpreter printed something else")
			}
		}
	}
}

// PreloadDone reports whether no preload is loading: none asked, or it
// loaded or failed. With Options.Preload it is false until Preload has
// run and finished. /ready waits for it, so that a snapshot or a
// pre-booted sandbox holds the loaded interpreter.
func (s *Service) PreloadDone() bool {
	if !s.opts.Preload {
		return true
	}
	select {
	case <-s.preReady:
		return true
	default:
		return false
	}
}

// takePreload hands out the preloaded interpreter (once) when it can
// become a kernel started as spec, waiting for it to finish loading. It
// returns nil when there is none or it does not fit (then it is told to
// exit).
func (s *Service) takePreload(ctx context.Context, spec proc.Spec) *preloaded {
	s.mu.Lock()
	pl := s.pre
	s.pre = nil
	s.mu.Unlock()
	if pl == nil {
		return nil
	}
	select {
	case <-pl.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if s.pre == nil && !s.closed {
			s.pre = pl // still loading: keep it for the next start
			pl = nil
		}
		s.mu.Unlock()
		if pl != nil {
			go func() { <-pl.ready; pl.discard() }()
		}
		return nil
	}
	if !pl.ok || !pl.alive() || !pl.fits(spec) {
		pl.discard()
		return nil
	}
	return pl
}

func (pl *preloaded) alive() bool {
	select {
	case <-pl.p.Done():
		return false
	default:
		return true
	}
}

// discard tells the interpreter to exit (EOF on its stdin).
func (pl *preloaded) discard() {
	if pl.p != nil {
		_ = pl.p.CloseStdin()
	}
}

// fits reports whether a kernel started as spec would run as the
// preloaded interpreter does: same identity, same startup variables.
func (pl *preloaded) fits(spec proc.Spec) bool {
	a, b := pl.spec.Identity, spec.Identity
	if (a == nil) != (b == nil) || (a != nil && (a.UID != b.UID || a.GID != b.GID || !slices.Equal(a.Groups, b.Groups))) {
		return false
	}
	startup := func(env []string) map[string]string {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, "PYTHON") || k == "LANG" || strings.HasPrefix(k, "LC_") {
				m[k] = v
			}
		}
		return m
	}
	x, y := startup(pl.spec.Env), startup(spec.Env)
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// spawn makes the preloaded interpreter the kernel of spec (a
// jupyter.Options.Spawn): its arguments, environment and directory go to
// it as one JSON line on its stdin, which then closes.
func (pl *preloaded) spawn(spec proc.Spec) (*proc.Process, error) {
	if len(spec.Args) < 3 || spec.Args[1] != "-c" || spec.Args[2] != pythonLauncher {
		pl.discard()
		return nil, errors.New("not a python kernel launch")
	}
	env := make(map[string]string, len(spec.Env))
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	line, err := json.Marshal(struct {
		Args []string          `json:"args"`
		Env  map[string]string `json:"env"`
		Cwd  string            `json:"cwd"`
	}{spec.Args[3:], env, spec.Dir})
	if err != nil {
		pl.discard()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pl.p.WriteStdin(ctx, append(line, '\n')); err != nil {
		pl.discard()
		return nil, errors.Join(jupyter.ErrNotStarted, err)
	}
	_ = pl.p.CloseStdin()
	return pl.p, nil
}
