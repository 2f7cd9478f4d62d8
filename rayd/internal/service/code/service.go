// Package code implements CodeService, the stateful code interpreter: one
// Jupyter kernel (internal/jupyter) per context, at most 8 contexts, the
// default ones (default-<language>) included. One file per RPC.
//
// Decisions:
//   - The default Python context's kernel starts eagerly after /run when
//     Options.Eager is set (-kernel-start eager; lazy is rayd's default), otherwise
//     lazily on first use; every other kernel starts when its context is
//     created (and again on the next use after it died).
//   - Health's kernel_ready is true once the default kernel has answered
//     kernel_info and is alive (eager), or, lazily, once /run has happened
//     and no start of the default kernel has failed since its last
//     success (the kernel will start on first use).
//   - One execution at a time per context: a second Execute waits (queues)
//     for the first to end; Jupyter kernels serialise anyway.
//   - Context envs go into the kernel's environment. Per-Execute envs
//     cannot change a running kernel's environ, so a silent
//     os.environ.update runs before the cell and a silent restore after
//     it (Python only): code the cell starts sees them; threads the cell
//     leaves running see the restored values.
//   - rayd cannot tell a client's cancel from a dropped connection, and
//     losing a long cell to a network blip is worse than running an
//     abandoned one a minute longer: a stream that ends early leaves the
//     cell running for Reattach, and interrupts it only when nobody
//     follows it within DetachGrace (60 s). A client that means to stop
//     the cell calls Interrupt; the SDK does on a context cancel. E2B's
//     code-interpreter API (service/envdcode) asks otherwise
//     (ExecuteOptions.InterruptOnDrop): its clients cannot reattach, and
//     E2B's server interrupts a cell whose client went away, so the next
//     cell does not queue behind an abandoned one.
package code

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Limits.
const (
	// MaxContexts is the cap on contexts (kernels), default ones included.
	MaxContexts = 8
	// MaxCodeBytes bounds one cell.
	MaxCodeBytes = 1 << 20
	// keepaliveAfter is the silence after which a stream gets a keepalive.
	keepaliveAfter = 5 * time.Second
	// probeTimeout bounds the reseed of one kernel at /resume.
	probeTimeout = 5 * time.Second
)

// Options configure the service.
type Options struct {
	State      *sandbox.State
	Supervisor *proc.Supervisor
	Builder    *launch.Builder
	Logger     *slog.Logger
	// Eager starts the default Python kernel right after /run (OnRun).
	Eager bool
	// Preload loads a Python interpreter with ipykernel at boot (Preload),
	// which becomes the first Python kernel (see preload.go).
	Preload bool
	// BaseDir is where kernel directories go; "" makes a fresh 0711
	// directory under os.TempDir() on first use (after /run).
	BaseDir string
	// InterruptGrace is how long an interrupted cell may take to stop
	// before its kernel is restarted; 0: 5 s.
	InterruptGrace time.Duration
	// KernelSpecDirs are searched, in order, for the kernelspec of a
	// language other than Python ("<dir>/<spec>/kernel.json", whose argv
	// names "{connection_file}"); nil: DefaultKernelSpecDirs.
	KernelSpecDirs []string
	// DetachGrace is how long a cell whose stream dropped runs on without
	// a follower before it is interrupted; 0: DefaultDetachGrace.
	DetachGrace time.Duration
}

// DefaultDetachGrace is Options.DetachGrace's default: the SDK's default
// reconnect budget.
const DefaultDetachGrace = 60 * time.Second

// Service implements raydv1connect.CodeServiceHandler.
type Service struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	contexts map[string]*codeContext
	baseDir  string
	ownsBase bool
	closed   bool

	pre        *preloaded    // the preloaded interpreter, until taken
	preStarted bool          // Preload ran
	preReady   chan struct{} // closed once the preload loaded or failed (Options.Preload)

	ctxSeq     uint64                 // contexts made so far (under mu): their order
	python     atomic.Pointer[string] // the interpreter that has ipykernel
	readyFail  atomic.Bool            // the last default-kernel start failed
	execSeq    atomic.Uint64
	runStarted atomic.Bool
	bg         sync.WaitGroup
}

var _ raydv1connect.CodeServiceHandler = (*Service)(nil)

// New returns the service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.InterruptGrace <= 0 {
		opts.InterruptGrace = jupyter.DefaultInterruptGrace
	}
	if opts.KernelSpecDirs == nil {
		opts.KernelSpecDirs = DefaultKernelSpecDirs
	}
	if opts.DetachGrace <= 0 {
		opts.DetachGrace = DefaultDetachGrace
	}
	return &Service{opts: opts, log: opts.Logger, contexts: map[string]*codeContext{}, baseDir: opts.BaseDir, preReady: make(chan struct{})}
}

// boot returns the installed configuration (the auth interceptor refused
// calls before /run).
func (s *Service) boot() (*sandbox.Boot, error) {
	if b := s.opts.State.Boot(); b != nil {
		return b, nil
	}
	return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
}

// normLanguage maps the accepted spellings to a language ("" is python).
func normLanguage(l string) (string, bool) {
	switch strings.ToLower(l) {
	case "", "python", "python3", "py":
		return "python", true
	case "bash", "sh":
		return "bash", true
	case "javascript", "js":
		return "javascript", true
	case "typescript", "ts":
		return "typescript", true
	case "r":
		return "r", true
	case "java":
		return "java", true
	}
	return "", false
}

// languagesText names the languages for refusals of another one.
const languagesText = "language must be python, javascript, typescript, bash, r or java"

// defaultLanguages are the languages whose default contexts exist from
// the start (listed before any cell ran, as E2B's code interpreter lists
// its default Python and JavaScript contexts) when their kernels are
// installed; their kernels still start on first use. The other
// languages' default contexts appear on first use.
var defaultLanguages = []string{"python", "javascript"}

func defaultID(language string) string { return "default-" + language }

func isDefault(id string) bool { return strings.HasPrefix(id, "default-") }

// DefaultKernelSpecDirs are where Jupyter kernelspecs of other languages
// live (Options.KernelSpecDirs).
var DefaultKernelSpecDirs = []string{"/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels"}

// kernelSpecs names the kernelspecs of each non-Python language, in the
// order tried, and what to install when none is there.
var kernelSpecs = map[string]struct {
	specs   []string
	missing string
}{
	"bash":       {[]string{"bash"}, "the bash kernel (bash_kernel, in the rayito-base-poly image)"},
	"javascript": {[]string{"deno"}, "the JavaScript kernel (Deno, in the rayito-base-poly image)"},
	"typescript": {[]string{"deno"}, "the TypeScript kernel (Deno, in the rayito-base-poly image)"},
	"r":          {[]string{"ir", "r"}, "the R kernel (IRkernel)"},
	"java":       {[]string{"java"}, "the Java kernel (IJava)"},
}

// pythonCandidates are the interpreters tried for ipykernel, in order.
var pythonCandidates = []string{"/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"}

// kernelArgv returns the command of a language's kernel with
// "{connection_file}" where the connection file goes.
func (s *Service) kernelArgv(ctx context.Context, language string) ([]string, error) {
	if language != "python" {
		ks := kernelSpecs[language]
		for _, name := range ks.specs {
			for _, dir := range s.opts.KernelSpecDirs {
				b, err := os.ReadFile(filepath.Join(dir, name, "kernel.json"))
				if err != nil {
					continue
				}
				var spec struct {
					Argv []string `json:"argv"`
				}
				if json.Unmarshal(b, &spec) == nil && len(spec.Argv) > 0 && slices.Contains(spec.Argv, "{connection_file}") {
					return spec.Argv, nil
				}
			}
		}
		return nil, &jupyter.MissingError{Missing: ks.missing}
	}
	py, err := s.findPython(ctx)
	if err != nil {
		return nil, err
	}
	// History stays in memory: IPython's default SQLite file in HOME
	// would keep every cell (secrets included) across HOME persistence,
	// and its writer thread costs about 1 ms per cell here.
	return []string{py, "-c", pythonLauncher, "-f", "{connection_file}", "--HistoryManager.hist_file=:memory:"}, nil
}

// pythonProbe exits 0 when ipykernel can be found, without importing it
// (a few ms, where importing it takes half a second).
const pythonProbe = "import importlib.util, sys\nsys.exit(importlib.util.find_spec('ipykernel') is None)\n"

// pythonImport loads ipykernel as ipykernel_launcher does (the working
// directory off sys.path while ipykernel loads; IPython puts it back for
// the user's code), without loading two packages the kernel never uses
// for rayd: debugpy (the Jupyter debugger, which rayd does not relay) and
// jedi (completion, which no RPC asks for). Together they are over a
// third of the kernel's import time (about 200 of 670 ms here, measured
// with -X importtime). They are unblocked once ipykernel has loaded, so a
// cell may still import them.
const pythonImport = "import sys\n" +
	"if sys.path and sys.path[0] == '':\n    del sys.path[0]\n" +
	"sys.modules['debugpy'] = sys.modules['jedi'] = None\n" +
	"from ipykernel import kernelapp\n" +
	"del sys.modules['debugpy'], sys.modules['jedi']\n"

// pythonLauncher starts a kernel at once (its arguments follow the script).
const pythonLauncher = pythonImport + "kernelapp.launch_new_instance()\n"

// findPython returns the first interpreter that imports ipykernel,
// probed once (through the supervisor, which reaps every child) and
// remembered; a failed probe is retried on the next call.
func (s *Service) findPython(ctx context.Context) (string, error) {
	if p := s.python.Load(); p != nil {
		return *p, nil
	}
	for _, py := range pythonCandidates {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		p, err := s.opts.Supervisor.Start(proc.Spec{
			Path: py, Args: []string{py, "-c", pythonProbe},
			Env: []string{"PATH=" + launch.DefaultPath}, Dir: "/", Timeout: 30 * time.Second,
		})
		if err != nil {
			return "", err
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if x, _ := p.Exit(); x.Status == proc.StatusExited && x.ExitCode == 0 {
			s.python.Store(&py)
			return py, nil
		}
	}
	return "", &jupyter.MissingError{Missing: "the Python kernel (python3 with ipykernel: Debian's python3-ipykernel)"}
}

// kernelBase returns the directory kernel directories go in, making it on
// first use: 0711 and owned by rayd, so a kernel's uid can reach its own
// 0700 directory inside but nobody can list the others.
func (s *Service) kernelBase() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", jupyter.ErrClosed
	}
	if s.baseDir != "" {
		return s.baseDir, nil
	}
	dir, err := os.MkdirTemp("", "rayd-kernels-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		os.Remove(dir)
		return "", err
	}
	s.baseDir, s.ownsBase = dir, true
	return dir, nil
}

// startKernel starts a kernel for cc.
func (s *Service) startKernel(ctx context.Context, cc *codeContext) (*jupyter.Kernel, error) {
	boot, err := s.boot()
	if err != nil {
		return nil, err
	}
	argv, err := s.kernelArgv(ctx, cc.language)
	if err != nil {
		return nil, err
	}
	base, err := s.kernelBase()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	k, err := jupyter.Start(ctx, jupyter.Options{
		Supervisor:     s.opts.Supervisor,
		BaseDir:        base,
		Logger:         s.log,
		InterruptGrace: s.opts.InterruptGrace,
		Spec: func(connFile string) (proc.Spec, error) {
			args := make([]string, 0, len(argv)-1)
			for _, a := range argv[1:] {
				args = append(args, strings.ReplaceAll(a, "{connection_file}", connFile))
			}
			envs := map[string]string{}
			if connFile != "" {
				// Jupyter's runtime files stay in the kernel's own directory.
				envs["JUPYTER_RUNTIME_DIR"] = filepath.Dir(connFile)
			}
			for k, v := range cc.envs {
				envs[k] = v
			}
			spec, err := s.opts.Builder.Spec(boot, launch.Request{Cmd: argv[0], Args: args, Envs: envs, Cwd: cc.cwd})
			if err != nil {
				return spec, err
			}
			spec.Tag = "rayd:kernel:" + cc.id
			return spec, nil
		},
		Spawn: func(spec proc.Spec) (*proc.Process, error) {
			if cc.language == "python" {
				if pl := s.takePreload(ctx, spec); pl != nil {
					if p, err := pl.spawn(spec); err == nil {
						return p, nil
					}
					// It went away (sandbox code can kill it): start afresh.
				}
			}
			return s.opts.Supervisor.Start(spec)
		},
	})
	if err != nil {
		s.log.Warn("kernel start failed", "context_id", cc.id, "took_ms", time.Since(start).Milliseconds(), "err_class", errClass(err))
		return nil, err
	}
	if cc.language == "python" {
		// Reseeded too: a preloaded interpreter seeded random before /run.
		if _, err := k.Execute(ctx, pythonSetup+pythonFormatters+reseedCode, true, func(jupyter.Output) {}); err != nil {
			k.Close()
			return nil, err
		}
	}
	s.log.Info("kernel started", "context_id", cc.id, "pid", k.Pid(), "took_ms", time.Since(start).Milliseconds())
	return k, nil
}

// errClass is a loggable class of a kernel start error (never its text).
func errClass(err error) string {
	r, _ := rpcerr.Classify(err)
	return r.String()
}

// context returns the context named id.
func (s *Service) context(id string) (*codeContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cc := s.contexts[id]; cc != nil {
		return cc, nil
	}
	return nil, jupyter.ErrContextNotFound
}

// defaultContext returns (making it) the default context of language.
func (s *Service) defaultContext(language string) (*codeContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := defaultID(language)
	if cc := s.contexts[id]; cc != nil {
		return cc, nil
	}
	if s.closed {
		return nil, jupyter.ErrClosed
	}
	if len(s.contexts) >= MaxContexts {
		return nil, jupyter.ErrTooManyContexts
	}
	cc := newContext(s, id, language, nil, nil)
	s.contexts[id] = cc
	return cc, nil
}

// remove forgets cc if it is still registered.
func (s *Service) remove(cc *codeContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.contexts[cc.id] == cc {
		delete(s.contexts, cc.id)
	}
}

// newExecutionID returns a fresh execution id.
func (s *Service) newExecutionID() string {
	return fmt.Sprintf("exec-%d-%s", s.execSeq.Add(1), randomHex(6))
}

// OnRun is called once /run installed the configuration: with Eager it
// starts the default Python kernel in the background.
func (s *Service) OnRun() {
	if !s.opts.Eager || !s.runStarted.CompareAndSwap(false, true) {
		return
	}
	cc, err := s.defaultContext("python")
	if err != nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), jupyter.DefaultStartTimeout)
		defer cancel()
		_, _ = cc.ensureKernel(ctx)
	}()
}

// KernelReady is Health's kernel_ready (see the package doc).
func (s *Service) KernelReady() bool {
	if s.opts.State.Boot() == nil || s.readyFail.Load() {
		return false
	}
	s.mu.Lock()
	cc := s.contexts[defaultID("python")]
	s.mu.Unlock()
	if cc == nil {
		return !s.opts.Eager
	}
	k := cc.current()
	if k == nil {
		return !s.opts.Eager
	}
	return k.Alive()
}

// reseedCode reseeds Python's random, and numpy's when it is loaded.
const reseedCode = "import random as _rayito_random, sys as _rayito_sys\n_rayito_random.seed()\n" +
	"if 'numpy' in _rayito_sys.modules:\n    _rayito_sys.modules['numpy'].random.seed()\n" +
	"del _rayito_random, _rayito_sys\n"

// OnResume reseeds every live Python kernel (so clones of one snapshot do
// not share random streams), in parallel, at most probeTimeout each. It
// reports kernel state as lost when a kernel that was running is dead.
func (s *Service) OnResume(ctx context.Context) (kernelStateLost bool) {
	s.mu.Lock()
	ccs := make([]*codeContext, 0, len(s.contexts))
	for _, cc := range s.contexts {
		ccs = append(ccs, cc)
	}
	s.mu.Unlock()
	var lost atomic.Bool
	var wg sync.WaitGroup
	for _, cc := range ccs {
		k := cc.current()
		if k == nil {
			continue
		}
		if !k.Alive() {
			lost.Store(true)
			continue
		}
		if cc.language != "python" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			if _, err := k.Execute(pctx, reseedCode, true, func(jupyter.Output) {}); errors.Is(err, jupyter.ErrDied) {
				lost.Store(true)
			}
		}()
	}
	wg.Wait()
	return lost.Load()
}

// Close destroys every context (kills the kernels, removes their
// directories) and refuses new ones. Called when rayd stops.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	ccs := make([]*codeContext, 0, len(s.contexts))
	for _, cc := range s.contexts {
		ccs = append(ccs, cc)
	}
	s.contexts = map[string]*codeContext{}
	s.mu.Unlock()
	for _, cc := range ccs {
		cc.destroy()
	}
	s.mu.Lock()
	pl := s.pre
	s.pre = nil
	s.mu.Unlock()
	if pl != nil {
		go func() { <-pl.ready; pl.discard() }()
	}
	s.bg.Wait()
	s.mu.Lock()
	if s.ownsBase && s.baseDir != "" {
		_ = os.RemoveAll(s.baseDir)
		s.baseDir = ""
	}
	s.mu.Unlock()
}

// KernelInfo describes a running kernel, for tests and diagnostics.
type KernelInfo struct {
	ContextID string
	Pid       int
	Dir       string // the kernel's private directory (connection file, sockets)
}

// Kernels lists the contexts' live kernels.
func (s *Service) Kernels() []KernelInfo {
	s.mu.Lock()
	ccs := make([]*codeContext, 0, len(s.contexts))
	for _, cc := range s.contexts {
		ccs = append(ccs, cc)
	}
	s.mu.Unlock()
	var out []KernelInfo
	for _, cc := range ccs {
		if k := cc.current(); k != nil && k.Alive() {
			out = append(out, KernelInfo{ContextID: cc.id, Pid: k.Pid(), Dir: k.Dir()})
		}
	}
	slices.SortFunc(out, func(a, b KernelInfo) int { return strings.Compare(a.ContextID, b.ContextID) })
	return out
}

// BaseDir returns the directory that holds the kernels' directories ("" before
// the first kernel or after Close).
func (s *Service) BaseDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.baseDir
}
