// Package runner wires one benchmark run: the in-process localvm, the
// optional envd peer, CPU pinning, the suites, the goals and the output.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/bench/internal/peer"
	"github.com/rayito-dev/rayito/bench/internal/pin"
	"github.com/rayito-dev/rayito/bench/internal/procfs"
	"github.com/rayito-dev/rayito/bench/internal/suites"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
)

// Config is a run's settings (the command's flags).
type Config struct {
	Suites     []string // names, or ["all"]
	Iterations int      // > 0 caps every suite
	Warmup     int      // >= 0 replaces every suite's warm-up
	JSON       bool
	Peer       string // envd binary path, "" for none
	Pin        bool
	Subnet     netip.Prefix
	// Prebooted is the pool size of the second platform that the create
	// suite also measures (0: no second platform); PrebootedSubnet its
	// address pool.
	Prebooted       int
	PrebootedSubnet netip.Prefix
	// KernelStart is the main platform's localvm.Options.KernelStart.
	KernelStart string
	// SandboxBinary is both platforms' localvm.Options.SandboxBinary: a
	// rayito-sandbox build, or "" to re-execute the harness binary.
	SandboxBinary  string
	DensityMax     int
	DensityWorkers int
	MemoryN        int
	Idle           time.Duration
	Args           string // the command line, for the report
	// PlatformLog, when set, receives localvm's logs (no tokens, payloads
	// or environments); otherwise they are discarded.
	PlatformLog string

	Stdout, Stderr io.Writer
}

// resolve expands "all" and checks names.
func resolve(names []string) ([]suites.Suite, error) {
	all := suites.All()
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	var out []suites.Suite
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(s suites.Suite) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown suite %q (have %s)", n, strings.Join(suites.Names(), ","))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Run runs the suites and writes the report. It returns an error only when
// the run could not start; failing suites are reported in the output.
func Run(ctx context.Context, cfg Config) (err error) {
	start := time.Now()
	list, err := resolve(cfg.Suites)
	if err != nil {
		return err
	}
	progress := cfg.Stderr
	pinner, pinNote := pin.New(cfg.Pin)
	if err := pinner.Self(); err != nil {
		return fmt.Errorf("pin: %w", err)
	}

	tmp, err := os.MkdirTemp("", "rayito-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	logOut := io.Discard
	if cfg.PlatformLog != "" {
		f, err := os.OpenFile(cfg.PlatformLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("platform log: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	maxSbx := max(cfg.DensityMax, cfg.MemoryN) + 32
	srv, err := localvm.New(ctx, localvm.Options{
		StateDir:      filepath.Join(tmp, "state"),
		Logger:        platformLogger(logOut),
		Subnet:        cfg.Subnet,
		MaxSandboxes:  maxSbx,
		KernelStart:   cfg.KernelStart,
		SandboxBinary: cfg.SandboxBinary,
	})
	if err != nil {
		return fmt.Errorf("localvm: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		// Everything the run started ends here, on errors and Ctrl-C too.
		cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if terr := srv.TerminateAll(cctx); terr != nil {
			fmt.Fprintln(progress, "bench: terminate sandboxes:", terr)
		}
		stopServe()
		<-served
		_ = srv.Close(cctx)
	}()

	env := &suites.Env{
		Endpoint: "http://" + ln.Addr().String(), Tmp: tmp, Pin: pinner, Proc: procfs.Proc, Progress: progress,
		Iterations: cfg.Iterations, Warmup: cfg.Warmup, KernelStart: cfg.KernelStart,
		DensityMax: cfg.DensityMax, DensityWorkers: cfg.DensityWorkers, MemoryN: cfg.MemoryN, Idle: cfg.Idle,
	}
	defer env.Close()
	if cfg.Prebooted > 0 {
		pooled := &prebootedPlatform{cfg: cfg, dir: filepath.Join(tmp, "state-prebooted"), log: logOut}
		defer pooled.close(progress)
		env.Prebooted = pooled.start
	}

	rep := &harness.Report{Machine: machine(cfg, srv, pinner, pinNote, tmp)}

	if cfg.Peer != "" {
		ps, perr := launchPeer(ctx, cfg.Peer, pinner.Start)
		if perr != nil {
			rep.Machine.Peer = cfg.Peer + ": error: " + perr.Error()
		} else {
			defer ps.Close()
			env.Peer = peer.NewClient(ps.Base, "root")
			defer env.Peer.Close()
			rep.Machine.Peer = fmt.Sprintf("%s (envd, pid %d, %s, user root)", cfg.Peer, ps.Pid(), ps.Base)
		}
	}

	rep.Results = runSuites(ctx, env, list, progress)
	rep.Goals = harness.EvaluateGoals(rep)
	rep.Machine.WallSecs = time.Since(start).Seconds()
	if cfg.JSON {
		err = harness.WriteJSON(cfg.Stdout, rep)
	} else {
		harness.WriteTable(cfg.Stdout, rep)
	}
	if err == nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	return err
}

// machine describes the machine and the run's setup for the report.
func machine(cfg Config, srv *localvm.Server, pinner *pin.Pinner, pinNote, tmp string) harness.Machine {
	m := harness.Machine{
		Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), CPUModel: procfs.Proc.CPUModel(),
		Kernel: procfs.Kernel(), GoVersion: runtime.Version(), Root: os.Geteuid() == 0, Privileged: srv.Privileged(),
		Pinned: pinner.Enabled(), PinNote: pinNote, Peer: "not given", TempFS: tmp + " (" + procfs.FSType(tmp) + ")", Args: cfg.Args,
	}
	if !pinner.Enabled() {
		m.PinNote = "not pinned: " + pinNote
	}
	return m
}

// runSuites runs the suites in order until ctx ends, reporting progress,
// and returns their results with the extra ones each suite added to env.
func runSuites(ctx context.Context, env *suites.Env, list []suites.Suite, progress io.Writer) []harness.Result {
	var results []harness.Result
	for _, s := range list {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(progress, "bench: suite %s...\n", s.Name)
		t := time.Now()
		r := runSuite(ctx, env, s)
		r.Finish()
		fmt.Fprintf(progress, "bench: suite %s done in %.1f s\n", s.Name, time.Since(t).Seconds())
		if r.Error != "" {
			fmt.Fprintf(progress, "bench: suite %s: error: %s\n", s.Name, r.Error)
		}
		results = append(results, r)
		for _, x := range env.TakeResults() {
			x.Finish()
			if x.Error != "" {
				fmt.Fprintf(progress, "bench: %s: error: %s\n", x.Suite, x.Error)
			}
			results = append(results, x)
		}
	}
	return results
}

// runSuite runs one suite, turning a panic into an error result so that
// the run continues and cleanup still happens.
func runSuite(ctx context.Context, env *suites.Env, s suites.Suite) (r harness.Result) {
	defer func() {
		if p := recover(); p != nil {
			r = harness.Result{Suite: s.Name, Error: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	return s.Run(ctx, env)
}

// prebootedPlatform is the second in-process platform, with a pool of
// pre-booted sandboxes, that the create suite measures besides the run's
// own. It starts on first use.
type prebootedPlatform struct {
	cfg Config
	dir string
	log io.Writer

	p       *suites.PrebootedPlatform
	srv     *localvm.Server
	stop    context.CancelFunc
	served  chan error
	started bool
	err     error
}

// peerPrefix is the network of the peer's own namespace.
var peerPrefix = netip.MustParsePrefix("10.252.1.0/24")

// launchPeer starts envd in a network namespace of its own (root only):
// it listens on every interface and runs commands as root without a
// token, so it never gets the machine's. The namespace goes when the
// returned server is closed.
func launchPeer(ctx context.Context, path string, start func(*exec.Cmd) error) (*peerServer, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the peer runs in a network namespace of its own (it listens on every interface and runs commands as root without a token): run the bench as root")
	}
	pn, err := localvmtest.NewPeerNet(peerPrefix, 0)
	if err != nil {
		return nil, fmt.Errorf("the peer's namespace: %w", err)
	}
	s, err := peer.Launch(ctx, path, start, pn)
	if err != nil {
		pn.Close()
		return nil, err
	}
	return &peerServer{Server: s, ns: pn}, nil
}

// peerServer is envd and its namespace.
type peerServer struct {
	*peer.Server
	ns *localvmtest.PeerNet
}

func (p *peerServer) Close() {
	p.Server.Close()
	p.ns.Close()
}

// platformLogger is the in-process platform's logger: debug records to w
// with -platform-log, otherwise none at all. Formatting debug records
// into io.Discard (one per proxied request) cost about 35 µs of the
// harness's CPU per request, which no user pays: `rayito local` logs at
// Info by default, and debug records are then dropped before formatting.
func platformLogger(w io.Writer) *slog.Logger {
	if w == io.Discard {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (pp *prebootedPlatform) start(ctx context.Context) (*suites.PrebootedPlatform, error) {
	if pp.started {
		return pp.p, pp.err
	}
	pp.started = true
	srv, err := localvm.New(ctx, localvm.Options{
		StateDir:      pp.dir,
		Logger:        platformLogger(pp.log),
		Subnet:        pp.cfg.PrebootedSubnet,
		Prebooted:     pp.cfg.Prebooted,
		KernelStart:   pp.cfg.KernelStart,
		SandboxBinary: pp.cfg.SandboxBinary,
	})
	if err != nil {
		pp.err = fmt.Errorf("localvm (pre-booted): %w", err)
		return nil, pp.err
	}
	pp.srv = srv
	if _, target := srv.Prebooted(); target == 0 {
		pp.p = &suites.PrebootedPlatform{Unavailable: "not available (the pool of pre-booted sandboxes needs the root platform)"}
		return pp.p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pp.err = err
		return nil, err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	pp.stop, pp.served = stop, make(chan error, 1)
	go func() { pp.served <- srv.Serve(sctx, ln) }()
	pp.p = &suites.PrebootedPlatform{
		Endpoint: "http://" + ln.Addr().String(),
		N:        pp.cfg.Prebooted,
		WaitFull: func(ctx context.Context) error {
			for {
				if ready, target := srv.Prebooted(); ready >= target {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
		},
	}
	return pp.p, nil
}

// close ends the second platform's sandboxes, its pool and the platform.
func (pp *prebootedPlatform) close(progress io.Writer) {
	if pp.srv == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := pp.srv.TerminateAll(cctx); err != nil {
		fmt.Fprintln(progress, "bench: terminate sandboxes (pre-booted platform):", err)
	}
	if pp.stop != nil {
		pp.stop()
		<-pp.served
	}
	_ = pp.srv.Close(cctx)
}
