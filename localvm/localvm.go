// Package localvm is Rayito's embedded local platform: a faithful stand-in
// for AWS Lambda MicroVMs on one Linux machine.
//
// A [Server] serves, on one loopback port (127.0.0.1:7450 by default), the
// same REST-JSON control-plane API as the lambda-microvms service
// (RunMicrovm, GetMicrovm, ListMicrovms, TerminateMicrovm,
// SuspendMicrovm, ResumeMicrovm, CreateMicrovmAuthToken; idle policies with
// auto-resume), and the endpoint proxy of every microVM: a request whose
// Host is a microVM's endpoint, "<uuid>.microvms.localhost", goes to that
// microVM when it carries a valid auth token, the rest to the API.
// HTTP/1.1 and cleartext HTTP/2 (h2c) are both spoken. Suspend freezes the
// sandbox's cgroup, so it needs a root platform.
//
// Each microVM is the guest daemon rayd in fresh Linux namespaces (a user
// namespace onto a host uid range of its own among them) and a cgroup,
// driven through its lifecycle hooks exactly as the service does. A Server
// owns the sandboxes of its state directory and nothing else (see
// [Server.Scope]).
// This is container-grade isolation, not a virtual machine: sandboxes
// share the host's kernel. Full fidelity (user switching, network policy,
// resource limits) needs root; without root sandboxes run as plain
// processes of the current user, and features that need privileges fail
// with an error (see [Server.Privileged]).
//
// The API has no credentials of its own, so it listens on loopback only
// and serves only its owner: New refuses any other address unless
// [Options.AllowRemote] is set; every connection's client is looked up in
// the kernel when it is accepted, and a client of another user (or one
// that cannot be told) gets 403 NotOwnerException on every request, API
// and endpoint proxy alike; the API refuses requests from web pages (an
// Origin header) and, unless AllowRemote, requests whose Host is not a
// loopback name. AllowRemote turns the owner check off.
//
// Sandboxes outlive the Server: [Server.Close] leaves them running and the
// next Server on the same state directory re-adopts them (or records them
// as lost). [Server.TerminateAll] ends them all. A root platform can keep
// a few sandboxes booted ahead of RunMicrovm ([Options.Prebooted]); those
// end with the Server.
//
// Any binary that embeds localvm must call [MaybeRunInit] first thing in
// main: sandboxes are started by re-executing the binary itself.
package localvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/api"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/templates"
	"github.com/rayito-dev/rayito/proto/localplatform"
)

// DefaultAddr is the default listen address of the platform (that of
// localplatform.DefaultEndpoint).
const DefaultAddr = "127.0.0.1:7450"

// MaxPrebooted bounds Options.Prebooted.
const MaxPrebooted = registry.MaxPrebooted

// Server limits.
const (
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
	idleTimeout       = 2 * time.Minute
	// shutdownGrace is how long Serve lets requests in flight finish after
	// its context ends, before it closes their connections.
	shutdownGrace = 5 * time.Second
	// runWait is how long RunMicrovm waits for the new sandbox to boot
	// before answering (PENDING if it has not): a local boot takes tens of
	// milliseconds, so clients need not poll.
	runWait = 2 * time.Second
	// localRateFactor multiplies the AWS service's TPS quotas into the
	// local platform's default throttling rates.
	localRateFactor = 10
)

// Options configure a Server.
type Options struct {
	// Addr is the TCP address ListenAndServe listens on; default
	// DefaultAddr. It must be a loopback address (or "localhost") unless
	// AllowRemote is set.
	Addr string
	// StateDir holds the platform's state: the auth-token key, one state
	// file and one directory (with rayd's log) per microVM. Default
	// DefaultStateDir(). It is created with mode 0700.
	StateDir string
	// Logger receives the platform's logs; never tokens, payloads or
	// environments. Nil means slog.Default().
	Logger *slog.Logger
	// MaxSandboxes bounds the microVMs that are not TERMINATED; default 64.
	MaxSandboxes int
	// AllowRemote lets the server listen on a non-loopback address, accept
	// any Host header and serve any client: the owner check (only the
	// user the platform runs as) needs a local client to look up. The API
	// has no authentication: anyone who can reach the port can run
	// sandboxes. Leave it off.
	AllowRemote bool
	// Subnet is the private IPv4 pool sandboxes take their /30s from;
	// zero means 10.213.0.0/16. Addresses already on the host are skipped.
	Subnet netip.Prefix
	// AWSQuotas throttles the API at the AWS service's published TPS
	// quotas (RunMicrovm 5/s, TerminateMicrovm 10/s, ...), to try a client
	// against the service's limits. By default the local platform allows
	// ten times those rates: one machine creates sandboxes far faster.
	AWSQuotas bool
	// AllowUnisolated lets New start a platform whose sandboxes are NOT
	// isolated (plain processes of the current user, with its access to
	// the machine) when it can isolate none: not root, and unprivileged
	// user namespaces unusable. Without it New fails with an error
	// wrapping ErrUnisolated. Even with it, such a platform refuses what it
	// cannot enforce (a sandbox without Internet access, limits), and
	// every sandbox says so (Server.Isolation, rayd's Health).
	AllowUnisolated bool
	// KernelStart is when the code interpreter's default Python kernel
	// starts in each sandbox (rayd's -kernel-start): "lazy" (the default,
	// ""), on the first cell; "preload", on the first cell but in an
	// interpreter that loaded ipykernel at boot (a first cell of about
	// 0.1 s instead of 0.5-0.7 s, for about 50 MB per sandbox until then);
	// "eager", preloaded and started right after the sandbox starts.
	KernelStart string
	// UpstreamCAs are PEM certificates every sandbox's secret gateway
	// trusts for its upstreams besides the system roots (rayd's
	// -upstream-ca): a private CA of the upstreams the gateway calls, such
	// as test servers. Certificates only; the sandboxes' own tools do not
	// trust them.
	UpstreamCAs []byte
	// DNS, when set, are the nameservers of every fully isolated
	// sandbox's /etc/resolv.conf, instead of the host's (like docker run
	// --dns).
	DNS []netip.Addr
	// Prebooted is how many sandboxes the platform keeps booted ahead of
	// RunMicrovm, like the snapshots of Lambda MicroVMs: each is rayd, up
	// to its ready hook, with nothing unique in it (no token, payload,
	// environment or metadata; no Internet access; the default limits),
	// under a fresh microVM id. RunMicrovm hands one out (applying the
	// request's egress and limits, then the run hook) and the pool refills
	// in the background, one boot at a time and only while no RunMicrovm
	// boot is in progress. Pooled sandboxes are not listed, count against
	// MaxSandboxes only in capacity users leave free, and are terminated
	// by Close. 0 (the default) keeps none; at most MaxPrebooted. Root
	// platforms only: a rootless or unisolated platform logs that once and
	// boots every sandbox on request.
	Prebooted int
	// EventsAllowLoopback lets the events pipeline deliver webhooks to
	// loopback addresses (a receiver on this machine: a literal 127.x or
	// ::1 in its URL); every other private or reserved address stays
	// blocked. Off by default.
	EventsAllowLoopback bool
	// EventsRootCAs are PEM certificates trusted for webhook TLS besides
	// the system roots (a local receiver's private CA).
	EventsRootCAs []byte

	// SandboxBinary, when set, is the absolute path of the executable
	// every sandbox starts from, instead of re-executing this binary: a
	// build of cmd/rayito-sandbox of the same release, which holds only
	// the sandbox's init, rayd, sudo and S3 mount helper. A sandbox then
	// runs none of this binary's other package initialization (a CLI
	// linking the AWS SDK spends tens of milliseconds and megabytes of
	// heap there), so it starts sooner and idles in less memory. New opens
	// the file once and fails with an error wrapping ErrSandboxBinary
	// unless it is a regular executable file of root or of the platform's
	// user that nobody else can write, answers as a sandbox init, and was
	// built from the same code: the same versions of localvm, rayd and
	// proto, or the same release revision (SandboxBinaryStamp; a binary
	// that knows neither, such as a test binary, matches any).
	SandboxBinary string

	// IdleUnit is the length of one "second" of an idle policy's durations
	// (maxIdleDurationSeconds, suspendedDurationSeconds); 0 means a second.
	// Tests shorten it to wait out a one-minute policy in seconds; the API
	// still demands at least 60 of them.
	IdleUnit time.Duration
}

// DefaultStateDir is the default state directory:
// $XDG_STATE_HOME/rayito/localvm when XDG_STATE_HOME is set, else
// /var/lib/rayito/localvm for root, else ~/.local/state/rayito/localvm.
func DefaultStateDir() string { return registry.DefaultStateDir() }

// LogPath is the file in which the platform with state directory stateDir
// keeps sandbox id's rayd output (what `rayito sandbox logs` prints).
func LogPath(stateDir, id string) string { return registry.LogPath(stateDir, id) }

// Server is a running local platform. Its methods are safe for concurrent
// use.
type Server struct {
	opts  Options
	log   *slog.Logger
	deps  deps
	reg   *registry.Registry
	api   *api.Handler
	proxy proxy
	lock  *os.File    // the state directory's lock
	claim *scopeClaim // the machine-wide claim on the platform's scope
	owner uint32      // the uid the platform serves (its effective uid)
	xfer  transferListener
	// events is the lifecycle events pipeline (events.go); nil in tests'
	// fakes.
	events *eventsPlane
	// templates are the platform's templates (templates.go).
	templates *templates.Store

	closeOnce sync.Once
	closeErr  error
}

// proxy is the endpoint proxy as the Server uses it.
type proxy interface {
	http.Handler
	// Match reports whether a request is for a microVM's endpoint.
	Match(r *http.Request) bool
	// Close closes its idle connections to guests and its open tunnels.
	Close()
}

// deps are what New builds from the launcher, authtoken and proxy
// packages (see wire.go); tests substitute fakes.
type deps struct {
	launcher registry.Launcher
	minter   registry.Minter
	newProxy func(lookup func(endpoint string) (*registry.Target, bool)) proxy
	// dial reaches sandboxes' addresses (nil: a net.Dialer).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// transfers is the store of pre-signed transfers (nil: none).
	transfers transferStore
}

// New opens the platform: it creates and locks the state directory (only
// one Server may use it at a time: ErrInUse), loads (or creates) the
// auth-token key, starts the launcher and opens the registry,
// which re-adopts the sandboxes a previous Server left running and cleans
// up after the others. Serve or ListenAndServe then serve it; Close
// releases it.
func New(ctx context.Context, opts Options) (*Server, error) {
	opts, err := normalize(opts)
	if err != nil {
		return nil, err
	}
	return open(ctx, opts, func(scope string) (deps, error) {
		return wire(opts, wireConfig{scope: scope, subnet: opts.Subnet})
	})
}

// ErrInUse is New's error when another Server (in this process or another)
// has the state directory open. The error New returns wraps it and names
// the state directory and, when known, the other platform's pid.
var ErrInUse = errors.New("localvm: another local platform is using the state directory")

// inUseError is ErrInUse with the state directory and the holder's pid.
type inUseError struct {
	dir string
	pid int // 0 when unknown
}

func (e *inUseError) Error() string {
	if e.pid > 0 {
		return fmt.Sprintf("localvm: another local platform is using state dir %s (pid %d)", e.dir, e.pid)
	}
	return fmt.Sprintf("localvm: another local platform is using state dir %s", e.dir)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }

// lockFile is the file in the state directory that a Server holds locked.
const lockFile = "lock"

// open prepares and locks the state directory, claims its scope, builds
// the dependencies for that scope and opens the Server.
func open(ctx context.Context, opts Options, build func(scope string) (deps, error)) (*Server, error) {
	if err := registry.EnsureStateDir(opts.StateDir); err != nil {
		return nil, fmt.Errorf("localvm: state dir: %w", err)
	}
	lock, err := lockStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	claim, err := claimScope(opts.StateDir)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	d, err := build(claim.scope)
	if err == nil {
		var s *Server
		if s, err = newServer(ctx, opts, d); err == nil {
			if s.events, err = openEvents(opts); err == nil {
				s.lock, s.claim = lock, claim
				return s, nil
			}
			_ = s.reg.Close(ctx)
		}
	}
	claim.close()
	_ = lock.Close()
	return nil, err
}

// lockStateDir takes an exclusive lock on the state directory, held until
// the returned file is closed.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("localvm: state dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &inUseError{dir: dir, pid: lockHolder(filepath.Join(dir, lockFile))}
		}
		return nil, fmt.Errorf("localvm: state dir lock: %w", err)
	}
	// The holder's pid, for the message of the next one (best effort).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder reads the pid a Server wrote in the lock file; 0 if none.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// normalize fills in defaults and checks opts.
func normalize(opts Options) (Options, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if err := checkAddr(opts.Addr, opts.AllowRemote); err != nil {
		return opts, err
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return opts, fmt.Errorf("localvm: state dir: %w", err)
	}
	opts.StateDir = dir
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch opts.KernelStart {
	case "", "lazy", "preload", "eager":
	default:
		return opts, fmt.Errorf("localvm: Options.KernelStart must be lazy, preload or eager, not %q", opts.KernelStart)
	}
	if opts.Prebooted < 0 || opts.Prebooted > MaxPrebooted {
		return opts, fmt.Errorf("localvm: Options.Prebooted must be between 0 and %d, got %d", MaxPrebooted, opts.Prebooted)
	}
	return opts, nil
}

// checkAddr refuses a listen address that is not loopback unless
// allowRemote.
func checkAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("localvm: listen address: %w", err)
	}
	if allowRemote || isLoopback(host) {
		return nil
	}
	return errors.New("localvm: the listen address is not a loopback address; the API has no authentication (set AllowRemote to listen beyond loopback)")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newServer(ctx context.Context, opts Options, d deps) (*Server, error) {
	tpl, err := openTemplates(opts, d)
	if err != nil {
		return nil, err
	}
	reg, err := registry.Open(ctx, registry.Options{
		Templates:    tpl,
		StateDir:     opts.StateDir,
		Launcher:     d.launcher,
		Minter:       d.minter,
		Logger:       opts.Logger,
		MaxSandboxes: opts.MaxSandboxes,
		RunWait:      runWait,
		Dial:         d.dial,
		IdleUnit:     opts.IdleUnit,
		Prebooted:    opts.Prebooted,
	})
	if err != nil {
		return nil, err
	}
	// Layers are kept while a sandbox (adopted ones too) runs them.
	tpl.SetInUse(reg.LayersInUse)
	tpl.Sweep()
	rates := api.DefaultRates()
	if !opts.AWSQuotas {
		for op := range rates {
			rates[op] *= localRateFactor
		}
	}
	h, err := api.New(api.Options{Backend: reg, Logger: opts.Logger, AllowAnyHost: opts.AllowRemote, Rates: rates})
	if err != nil {
		_ = reg.Close(ctx)
		return nil, err
	}
	return &Server{opts: opts, log: opts.Logger, deps: d, reg: reg, api: h, proxy: d.newProxy(reg.Lookup), owner: uint32(os.Geteuid()), templates: tpl}, nil
}

// route refuses every user but the owner (see owner.go), then sends
// endpoint requests to the proxy and the rest to the API.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if !s.ownerOnly(w, r) {
		return
	}
	if s.proxy.Match(r) {
		s.proxy.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == localplatform.TransferSettingsPath {
		s.transferSettings(w, r)
		return
	}
	if r.URL.Path == localplatform.TemplatesPath || strings.HasPrefix(r.URL.Path, localplatform.TemplatesPath+"/") {
		s.templatesRoute(w, r)
		return
	}
	if r.URL.Path == localplatform.EventsPath || strings.HasPrefix(r.URL.Path, localplatform.EventsPath+"/") {
		s.eventsRoute(w, r)
		return
	}
	s.api.ServeHTTP(w, r)
}

// Serve serves the API and the endpoint proxy on ln (HTTP/1.1 and h2c)
// until ctx ends, then shuts down gracefully (requests in flight get a few
// seconds) and returns nil. A TCP listener must be on a loopback address
// unless Options.AllowRemote. Serve does not close the Server: sandboxes
// keep running until TerminateAll or forever.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !s.opts.AllowRemote && !ta.IP.IsLoopback() {
		return errors.New("localvm: the listener is not on a loopback address (set AllowRemote to serve beyond loopback)")
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.route),
		Protocols:         &protocols,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              1 << 20,
			MaxReceiveBufferPerStream:     4 << 20,
			MaxReceiveBufferPerConnection: 16 << 20,
		},
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext: connClient,
	}
	ctx, stop := context.WithCancel(ctx)
	transfersDone, err := s.serveTransfers(ctx, ln)
	if err != nil {
		stop()
		return fmt.Errorf("localvm: serve transfers: %w", err)
	}
	defer func() { stop(); transfersDone() }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("localvm: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// ListenAndServe listens on Options.Addr (port 0: any free port) and
// serves until ctx ends; see Serve. While it serves, the endpoint it
// serves (http://HOST:PORT) is recorded in the state directory
// (localplatform.EndpointFile), where the CLI and the SDK of the user find
// it when it is not the default one; ready, if not nil, is called with it
// once the record is written and the port accepts connections.
func (s *Server) ListenAndServe(ctx context.Context, ready ...func(endpoint string)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("localvm: %w", err)
	}
	endpoint := "http://" + ln.Addr().String()
	if localplatform.CheckEndpoint(endpoint) == nil { // not beyond loopback (AllowRemote)
		if err := localplatform.WriteEndpoint(s.opts.StateDir, endpoint); err != nil {
			_ = ln.Close()
			return err
		}
		defer localplatform.RemoveEndpoint(s.opts.StateDir, endpoint)
	}
	s.log.Info("localvm: serving", "addr", ln.Addr().String(), "state_dir", s.opts.StateDir, "privileged", s.Privileged(), "isolation", string(s.Isolation()))
	for _, f := range ready {
		if f != nil {
			f(endpoint)
		}
	}
	return s.Serve(ctx, ln)
}

// Scope is the platform's scope, derived from its state directory: its
// sandboxes' cgroups live under rayito-localvm-<scope>, their host-side
// veths are named rs<scope>-*, their nftables rules are in table inet
// rayito_localvm_<scope>.
func (s *Server) Scope() string { return s.claim.scope }

// TerminateAll terminates every microVM and waits until all are
// TERMINATED or ctx ends.
func (s *Server) TerminateAll(ctx context.Context) error { return s.reg.TerminateAll(ctx) }

// Drain is how a platform that is going away ends its sandboxes: call it
// while Serve still runs, then stop serving and Close. From now on
// RunMicrovm answers "The local platform is shutting down." and the pool
// boots no more; then every microVM is terminated (platform_shutdown), and
// Drain waits until all are TERMINATED or ctx ends. A client following a
// sandbox (a command's output, a watch) reads that it ended and why,
// instead of finding the platform gone and waiting out its reconnect
// timeout.
func (s *Server) Drain(ctx context.Context) error { return s.reg.Drain(ctx) }

// Prebooted reports how many pre-booted sandboxes are ready for
// RunMicrovm and how many the platform keeps (0 without a pool: see
// Options.Prebooted).
func (s *Server) Prebooted() (ready, target int) { return s.reg.Prebooted() }

// Privileged reports whether sandboxes get namespaces, cgroups and network
// policy (root). Without it they are plain processes of the current user.
func (s *Server) Privileged() bool { return s.deps.launcher.Privileged() }

// Close stops the platform's background work and waits for it (or ctx),
// then releases the state directory. It does not terminate microVMs: a
// later New on the same state directory re-adopts them. It terminates the
// pre-booted sandboxes of the pool (Options.Prebooted), which belong to
// no one. Call it after Serve has returned. Later calls return the first
// call's result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.templates != nil {
			s.templates.Close()
		}
		s.closeErr = s.reg.Close(ctx)
		if s.events != nil {
			s.events.close()
		}
		s.proxy.Close()
		idle := true // a launcher without machine-wide state (tests' fakes)
		if r, ok := s.deps.launcher.(interface {
			Release() error
			Idle() bool
		}); ok {
			if err := r.Release(); err != nil {
				s.log.Warn("localvm: releasing the scope's firewall table and cgroups", "err", err)
			}
			idle = r.Idle()
		}
		// The claim on the scope stays while sandboxes of it run (only
		// this state directory may sweep them), else it goes.
		if idle {
			s.claim.drop()
		} else {
			s.claim.close()
		}
		if s.lock != nil {
			_ = s.lock.Close()
		}
	})
	return s.closeErr
}
