// Package daemon wires rayd together: flags, the sandbox state, the process
// supervisor, the hooks server on the hooks port, the RPC API on the API
// port, and the lifecycle between them (lifecycle.go): the suspend gate
// the hooks close and reopen, and the sandbox's timeout, whose kill action
// makes rayd exit 124 and whose pause action asks the platform, through
// -lifecycle-fd, to suspend the sandbox. cmd/rayd only calls Main.
package daemon

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem/filesystemconnect"
	"github.com/rayito-dev/rayito/proto/gen/envd/process/processconnect"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/limits"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/apiserver"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
	"github.com/rayito-dev/rayito/rayd/internal/identity"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/logring"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/persist"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	codesvc "github.com/rayito-dev/rayito/rayd/internal/service/code"
	"github.com/rayito-dev/rayito/rayd/internal/service/configure"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdcode"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdfs"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdhttp"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdprocess"
	"github.com/rayito-dev/rayito/rayd/internal/service/files"
	"github.com/rayito-dev/rayito/rayd/internal/service/health"
	"github.com/rayito-dev/rayito/rayd/internal/service/lifecycle"
	"github.com/rayito-dev/rayito/rayd/internal/service/network"
	"github.com/rayito-dev/rayito/rayd/internal/service/process"
	"github.com/rayito-dev/rayito/rayd/internal/service/pty"
	"github.com/rayito-dev/rayito/rayd/internal/streamlimit"
	"github.com/rayito-dev/rayito/rayd/internal/sudo"
	"github.com/rayito-dev/rayito/rayd/internal/telemetry"
	"github.com/rayito-dev/rayito/rayd/internal/templatestart"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
	"github.com/rayito-dev/rayito/rayd/internal/version"
)

// Exit codes of rayd (and ExitSandboxTimeout, 124).
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// terminateGrace is the time user processes get between SIGTERM and
// SIGKILL when the sandbox terminates; /terminate has 10 s in all.
const terminateGrace = 3 * time.Second

// logRingSize is how many of its last log records rayd keeps for
// HealthService.Logs.
const logRingSize = 1024

// Config is rayd's configuration from flags and environment.
type Config struct {
	APIAddr string
	// HooksAddr is the TCP address of the hooks (without -hooks-addr: the
	// host of -api-addr, port 9000). With HooksFD it is only a decoy where
	// every caller counts as sandbox code ("" for none).
	HooksAddr string
	// HooksFD, when above 2 (the flag's default is -1; 0, the zero
	// value, means none too), is a listening Unix socket (inherited from
	// whoever started rayd) on which the platform calls the hooks:
	// the local platform's rootless mode, where the platform, rayd and the
	// sandbox's code share one uid. Only clients outside rayd's pid
	// namespace count as the platform on it, and no TCP caller does.
	HooksFD  int
	StateDir string
	// TemplateConfig is the image's template configuration file
	// (proto/template.RuntimePath by default); a missing file: none.
	TemplateConfig string
	// AllowRoot lets clients run as root (RAYITO_ALLOW_ROOT=1).
	AllowRoot bool
	// SudoSocket is where rayd serves sudo to the sandbox's users when
	// root is allowed (and rayd is root): package sudo. "": no sudo.
	SudoSocket string
	LogLevel   slog.Level
	// ReadyFD, when not negative, is a descriptor rayd writes one byte
	// ('R') to, then closes, once it listens and its services are built:
	// a supervisor learns that rayd is ready without polling its ports.
	ReadyFD int
	// Isolation is what the platform says of this sandbox's isolation
	// ("full", "rootless", "none"; "" when it says nothing): Health
	// reports it.
	Isolation string
	// MemoryLimit and ProcessLimit are the sandbox's own limits as the
	// platform set them (0: none known): Health reports them.
	MemoryLimit  uint64
	ProcessLimit uint
	// MemoryEventsFD, when above 2 (-1: none), is the sandbox's cgroup
	// memory.events (v2) or memory.oom_control (v1), opened by the local
	// platform: its OOM kill count tells an OOM kill from another SIGKILL.
	MemoryEventsFD int
	// LifecycleFD, when above 2 (-1: none), is a pipe the local platform
	// reads: rayd writes "suspend\n" to it when the sandbox's timeout
	// expires with on_timeout pause. Without it nobody can suspend the
	// sandbox, which then stays expired.
	LifecycleFD int
	// EagerKernel starts the default Python kernel right after /run
	// (-kernel-start eager); false (-kernel-start lazy, the default)
	// starts it on first use. Lazy is the default because an eager
	// kernel costs every sandbox a Python interpreter's start (about a
	// second of CPU) and its memory whether it runs code or not, which on
	// a small machine slows every other sandbox's create; the price is
	// the first cell, which waits for the kernel (0.85–1.0 s measured
	// against 18 ms once warm). An image made for code starts rayd eager.
	// Eager also preloads.
	EagerKernel bool
	// PreloadKernel (-kernel-start preload) loads a Python interpreter
	// with ipykernel at boot, before /ready, which becomes the first
	// kernel: the first cell then skips the imports (most of a kernel's
	// start) for one interpreter's memory (about 50 MB RSS) in every
	// sandbox until then. See the code service's preload.go.
	PreloadKernel bool
	// Egress says whether rayd programs the sandbox's network (the
	// network policy, the IMDS block, the egress proxy): EgressAuto (the
	// default: when -isolation is full or rootless), EgressOn (a microVM
	// image) or EgressOff.
	Egress string
	// UpstreamCAs are extra PEM certificates the secret gateway trusts
	// for its upstreams besides the system roots (-upstream-ca, base64:
	// a local platform's test servers). Certificates only, never keys.
	UpstreamCAs []byte
	// PlatformDirFD, when above 2 (-1: none), is a directory descriptor
	// (O_PATH) holding the local platform's services socket
	// (localplatform.ServicesSocket): its metadata service and
	// S3-compatible store, which HOME persistence uses instead of AWS's.
	PlatformDirFD int
	// MountHelper is the S3 mount helper (-mount-helper; default
	// s3mount.DefaultHelper, Rayito's rayito-mount-s3); AllowedMountBuckets the
	// allow-list from rayd's environment (RAYITO_ALLOWED_MOUNT_BUCKETS).
	MountHelper         string
	AllowedMountBuckets string
	// FUSEDevice is the FUSE device rayd opens for S3 mounts
	// (-fuse-device; default /dev/fuse).
	FUSEDevice string

	// E2B serves E2B's envd protocol (the E2B shim) on E2BAddr beside
	// the API (-e2b, default on). E2BAddrSet tells that -e2b-addr was
	// given: only then is a failure to listen there fatal (the default
	// port may be taken where several rayds share a network namespace;
	// rayd then serves without it and says so). Without -e2b-addr it is
	// the host of -api-addr with the envd port: rayd never listens on an
	// address the operator did not give it (see defaultAddrs).
	E2B        bool
	E2BAddr    string
	E2BAddrSet bool
	// E2BCodeAddr is the E2B code interpreter's address (with -e2b);
	// E2BCodeAddrSet as E2BAddrSet.
	E2BCodeAddr    string
	E2BCodeAddrSet bool

	// EventsOut receives the signed lifecycle event lines (events.go):
	// rayd's stdout under Main; nil: nowhere. ImageARN is the image they
	// name (RAYITO_IMAGE_ARN; "": none).
	EventsOut io.Writer
	ImageARN  string

	knobs *knobs // tests only (lifecycle.go); nil in production
}

// ParseFlags parses rayd's command line.
func ParseFlags(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Config{AllowRoot: getenv("RAYITO_ALLOW_ROOT") == "1", ImageARN: getenv(imageARNEnv), AllowedMountBuckets: getenv(ps3.AllowEnv), ReadyFD: -1, HooksFD: -1, MemoryEventsFD: -1, LifecycleFD: -1, PlatformDirFD: -1}
	fs := flag.NewFlagSet("rayd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.APIAddr, "api-addr", fmt.Sprintf(":%d", limits.DefaultAPIPort), "address of the RPC API (Connect, gRPC, gRPC-Web; HTTP/1.1 and h2c)")
	fs.BoolVar(&cfg.E2B, "e2b", true, "serve E2B's envd protocol (process.Process and filesystem.Filesystem over Connect, /files, /health) on -e2b-addr for the official e2b SDKs, behind the same access token as the API")
	fs.Func("e2b-addr", fmt.Sprintf("address of E2B's envd protocol (default: the host of -api-addr, port %d)", limits.E2BEnvdPort), func(v string) error {
		if v == "" {
			return errors.New("empty address (use -e2b=false to turn the E2B protocol off)")
		}
		cfg.E2BAddr, cfg.E2BAddrSet = v, true
		return nil
	})
	fs.Func("e2b-code-addr", fmt.Sprintf("address of the E2B code interpreter's HTTP API (/execute, /contexts) with -e2b (default: the host of -api-addr, port %d)", limits.E2BCodePort), func(v string) error {
		if v == "" {
			return errors.New("empty address (use -e2b=false to turn the E2B protocol off)")
		}
		cfg.E2BCodeAddr, cfg.E2BCodeAddrSet = v, true
		return nil
	})
	fs.StringVar(&cfg.HooksAddr, "hooks-addr", "", fmt.Sprintf("address of the platform's lifecycle hooks (HTTP/1.1) (default: the host of -api-addr, port %d)", limits.HooksPort))
	fs.StringVar(&cfg.StateDir, "state-dir", defaultStateDir(), "directory for rayd's private state (created 0700)")
	fs.StringVar(&cfg.TemplateConfig, "template-config", ptemplate.RuntimePath, "the image's template configuration (defaults and start command); a missing file means none")
	fs.StringVar(&cfg.SudoSocket, "sudo-socket", "", "with RAYITO_ALLOW_ROOT=1 (and rayd as root), serve sudo to the sandbox's users on this Unix socket (its client looks at "+sudo.SocketPath+"); empty: no sudo")
	fs.IntVar(&cfg.HooksFD, "hooks-fd", -1, "listening Unix socket descriptor the platform calls the hooks on; then only clients outside rayd's pid namespace are the platform, and every caller on -hooks-addr (\"\" for none) counts as sandbox code; -1: none")
	fs.IntVar(&cfg.ReadyFD, "ready-fd", -1, "descriptor to write 'R' to (then close) once rayd serves; -1: none")
	fs.StringVar(&cfg.Isolation, "isolation", "", "the sandbox's isolation as the platform reports it (full, rootless, none), shown by Health; empty: not reported")
	fs.Uint64Var(&cfg.MemoryLimit, "memory-limit", 0, "the sandbox's memory limit in bytes as the platform set it, shown by Health; 0: none known")
	fs.UintVar(&cfg.ProcessLimit, "process-limit", 0, "the sandbox's process limit as the platform set it, shown by Health; 0: none known")
	fs.Func("upstream-ca", "extra CA certificates (PEM, base64-encoded) the secret gateway trusts for its upstreams besides the system roots", func(v string) error {
		pem, err := base64.StdEncoding.DecodeString(v)
		if err != nil || !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return errors.New("not base64 of PEM certificates")
		}
		cfg.UpstreamCAs = append(cfg.UpstreamCAs, pem...)
		return nil
	})
	fs.IntVar(&cfg.MemoryEventsFD, "memory-events-fd", -1, "descriptor of the sandbox's cgroup memory.events (v2) or memory.oom_control (v1), whose oom_kill count marks OOM-killed processes; -1: none (then /proc/vmstat without -isolation)")
	fs.IntVar(&cfg.LifecycleFD, "lifecycle-fd", -1, "descriptor (a pipe the platform reads) rayd writes \"suspend\\n\" to when the sandbox's timeout expires with on_timeout pause; -1: none (nobody can suspend it then)")
	fs.IntVar(&cfg.PlatformDirFD, "platform-dir-fd", -1, "descriptor of the directory holding the local platform's services socket (its metadata service and S3-compatible store, for HOME persistence); -1: none (AWS: the instance metadata service and S3)")
	fs.StringVar(&cfg.MountHelper, "mount-helper", s3mount.DefaultHelper, "the S3 mount helper rayd starts for each mount (mount-s3's command line: rayito-mount-s3, or AWS's mount-s3 1.10 or later)")
	fs.StringVar(&cfg.FUSEDevice, "fuse-device", "/dev/fuse", "the FUSE device rayd opens for S3 mounts")
	fs.StringVar(&cfg.Egress, "egress", EgressAuto, "whether rayd programs the sandbox's outbound network (network policy, IMDS block, egress proxy on 127.0.0.1): auto (when -isolation is full or rootless), on (in a microVM image) or off; never turn it on where rayd shares the machine's own network namespace")
	kernelStart := fs.String("kernel-start", "lazy", "when the default Python kernel starts: lazy (on first use), preload (on first use, in an interpreter that loaded ipykernel at boot: a faster first cell for about 50 MB until then) or eager (preloaded, and started right after /run: for images made for code)")
	debug := fs.Bool("debug", false, "log at debug level (never logs payloads, commands or output)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *showVersion {
		return cfg, errVersion
	}
	if err := cfg.defaultAddrs(fs); err != nil {
		return cfg, err
	}
	switch *kernelStart {
	case "eager":
		cfg.EagerKernel = true
	case "preload":
		cfg.PreloadKernel = true
	case "lazy":
	default:
		return cfg, fmt.Errorf("-kernel-start must be lazy, preload or eager, not %q", *kernelStart)
	}
	if err := cfg.checkFlags(); err != nil {
		return cfg, err
	}
	if *debug {
		cfg.LogLevel = slog.LevelDebug
	}
	return cfg, nil
}

// checkFlags checks the parsed flags' values and how they go together:
// the modes, the descriptors, and a way for the platform to call the
// hooks.
func (c Config) checkFlags() error {
	switch c.Egress {
	case EgressAuto, EgressOn, EgressOff:
	default:
		return fmt.Errorf("-egress must be auto, on or off, not %q", c.Egress)
	}
	switch c.Isolation {
	case "", "full", "rootless", "none":
	default:
		return fmt.Errorf("-isolation must be full, rootless or none, not %q", c.Isolation)
	}
	if c.ReadyFD != -1 && c.ReadyFD < 3 {
		return fmt.Errorf("-ready-fd must be -1 or a descriptor above 2, not %d", c.ReadyFD)
	}
	if c.PlatformDirFD != -1 && c.PlatformDirFD < 3 {
		return fmt.Errorf("-platform-dir-fd must be -1 or a descriptor above 2, not %d", c.PlatformDirFD)
	}
	if c.HooksFD != -1 && c.HooksFD < 3 {
		return fmt.Errorf("-hooks-fd must be -1 or a descriptor above 2, not %d", c.HooksFD)
	}
	if err := c.checkMemoryEventsFD(); err != nil {
		return err
	}
	if err := c.checkLifecycleFD(); err != nil {
		return err
	}
	if c.hooksOverUnix() && c.HooksFD == c.ReadyFD {
		return fmt.Errorf("-hooks-fd and -ready-fd are the same descriptor (%d)", c.HooksFD)
	}
	if !c.hooksOverUnix() && c.HooksAddr == "" {
		return errors.New("-hooks-addr is empty and there is no -hooks-fd: the platform could not call the hooks")
	}
	return nil
}

var errVersion = errors.New("version requested")

// defaultAddrs fills in the listeners' addresses that were not given
// (fs is the parsed flag set) from the host of -api-addr: with -api-addr
// 127.0.0.1:8080 rayd listens on 127.0.0.1 only (hooks on 127.0.0.1:9000,
// the E2B ports 127.0.0.1:49983 and 127.0.0.1:49999), never on every
// interface because a flag was left out. -api-addr's default, ":8080",
// keeps the others on every interface, as a microVM image wants them.
// Only the egress proxy and the secret gateway, which serve the sandbox's
// own code on its loopback, listen elsewhere.
func (c *Config) defaultAddrs(fs *flag.FlagSet) error {
	host, port, err := net.SplitHostPort(c.APIAddr)
	if err != nil || port == "" {
		return errors.New("-api-addr must be HOST:PORT or :PORT")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	at := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	if !set["hooks-addr"] {
		c.HooksAddr = at(limits.HooksPort)
	}
	if !c.E2BAddrSet {
		c.E2BAddr = at(limits.E2BEnvdPort)
	}
	if !c.E2BCodeAddrSet {
		c.E2BCodeAddr = at(limits.E2BCodePort)
	}
	return nil
}

// hooksOverUnix reports whether the platform calls the hooks on the Unix
// listener HooksFD, and only there.
func (c Config) hooksOverUnix() bool { return c.HooksFD > 2 }

func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/run/rayd"
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("rayd-%d", os.Geteuid()))
}

// Main runs rayd and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseFlags(args, os.Getenv, stderr)
	switch {
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "rayd %s (revision %s)\n", version.Version, version.BuildRevision())
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case err != nil:
		fmt.Fprintln(stderr, "rayd:", err)
		return ExitUsage
	}
	cfg.EventsOut = stdout
	// The last records are kept for HealthService.Logs (E2B's sandbox
	// logs).
	log := slog.New(logring.Wrap(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}), logring.New(logRingSize)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = Run(ctx, cfg, log)
	// The stop is over. A late copy of the signal that began it (a
	// platform may signal both rayd and its process group) must not turn
	// this clean exit into a death by SIGTERM: from here on both are
	// ignored, not put back to their default action by stop.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	switch code := exitCode(err); code {
	case ExitOK:
		return code
	case ExitSandboxTimeout:
		log.Warn("rayd stopped: the sandbox's timeout expired (on_timeout kill)", "exit_code", code)
		return code
	default:
		log.Error("rayd failed", "err", err)
		return code
	}
}

// Run serves until ctx ends, the platform calls /terminate or the
// sandbox's timeout expires with on_timeout kill, then stops user
// processes and returns: nil, ErrSandboxTimeout for the timeout, or the
// error that stopped it.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	apiLn, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api listener: %w", err)
	}
	defer apiLn.Close()
	hooksLns, err := listenHooks(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, ln := range hooksLns {
			ln.Close()
		}
	}()
	hooksAddrs := make([]string, len(hooksLns))
	for i, ln := range hooksLns {
		hooksAddrs[i] = ln.Addr().Network() + ":" + ln.Addr().String()
	}

	lcFile, err := lifecycleFile(cfg.LifecycleFD)
	if err != nil {
		return fmt.Errorf("-lifecycle-fd: %w", err)
	}
	if lcFile != nil {
		defer lcFile.Close()
	}

	envdLn, codeLn, err := listenE2B(cfg, log)
	if err != nil {
		return err
	}
	if envdLn != nil {
		defer envdLn.Close()
	}
	if codeLn != nil {
		defer codeLn.Close()
	}

	d, err := New(cfg, log, nil)
	if err != nil {
		return err
	}
	if envdLn != nil {
		d.SetEnvdListener(envdLn)
	}
	if codeLn != nil {
		d.SetCodeListener(codeLn)
	}
	if lcFile != nil {
		d.setLifecycleOut(lcFile)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.onTerminated = cancel
	if cfg.ReadyFD >= 0 {
		if f := os.NewFile(uintptr(cfg.ReadyFD), "ready"); f != nil {
			_, _ = f.Write([]byte{ReadyByte})
			_ = f.Close()
		}
	}
	go trimAfterBoot(ctx)
	e2bAddr, codeAddr := "", ""
	if envdLn != nil {
		e2bAddr = envdLn.Addr().String()
	}
	if codeLn != nil {
		codeAddr = codeLn.Addr().String()
	}
	log.Info("rayd listening", "version", version.Version, "revision", version.BuildRevision(), "api", apiLn.Addr().String(), "e2b_envd", e2bAddr, "e2b_code", codeAddr, "hooks", hooksAddrs, "hooks_platform_over_unix", cfg.hooksOverUnix(), "root", d.privileged)
	if err := d.Serve(ctx, apiLn, hooksLns...); err != nil {
		return err
	}
	return d.StopReason()
}

// listenHooks opens the hooks' listeners: the Unix socket of -hooks-fd
// and -hooks-addr, each when given.
func listenHooks(cfg Config) ([]net.Listener, error) {
	var lns []net.Listener
	if cfg.hooksOverUnix() {
		ln, err := unixListenerFD(cfg.HooksFD)
		if err != nil {
			return nil, fmt.Errorf("hooks listener (-hooks-fd): %w", err)
		}
		lns = append(lns, ln)
	}
	if cfg.HooksAddr != "" {
		ln, err := net.Listen("tcp", cfg.HooksAddr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("hooks listener: %w", err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// listenE2B opens the E2B protocol's listeners with -e2b (nil without):
// envd's and the code interpreter's. A default port that is taken (several
// rayds in one network namespace) turns that listener off with a warning;
// an address given explicitly must work.
func listenE2B(cfg Config, log *slog.Logger) (envdLn, codeLn net.Listener, err error) {
	if !cfg.E2B {
		return nil, nil, nil
	}
	listen := func(addr string, explicit bool, what, flag string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		switch {
		case err == nil:
			return ln, nil
		case explicit:
			return nil, fmt.Errorf("%s listener: %w", what, err)
		}
		log.Warn(what+" off: cannot listen on its default address (give "+flag+", or -e2b=false)", "addr", addr, "err", err)
		return nil, nil
	}
	if envdLn, err = listen(cfg.E2BAddr, cfg.E2BAddrSet, "E2B envd protocol", "-e2b-addr"); err != nil {
		return nil, nil, err
	}
	if codeLn, err = listen(cfg.E2BCodeAddr, cfg.E2BCodeAddrSet, "E2B code interpreter", "-e2b-code-addr"); err != nil {
		if envdLn != nil {
			envdLn.Close()
		}
		return nil, nil, err
	}
	return envdLn, codeLn, nil
}

// bootTrimDelay is how long after it serves rayd hands its boot garbage
// back to the kernel.
const bootTrimDelay = 2 * time.Second

// trimAfterBoot collects once, bootTrimDelay after rayd serves, and
// returns the freed heap to the kernel (debug.FreeOSMemory). Building the
// services and the boot policy leaves about 0.8 MB of garbage and free
// pages that an idle rayd would otherwise keep resident for minutes: an
// idle sandbox's PSS went from 7.96 to 7.15 MB. It costs one GC.
func trimAfterBoot(ctx context.Context) {
	t := time.NewTimer(bootTrimDelay)
	defer t.Stop()
	select {
	case <-t.C:
		debug.FreeOSMemory()
	case <-ctx.Done():
	}
}

// unixListenerFD takes over fd, which must be a listening Unix stream
// socket. The listener rayd keeps is a close-on-exec duplicate, and fd is
// closed: no process rayd starts inherits it.
func unixListenerFD(fd int) (net.Listener, error) {
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "hooks")
	if f == nil {
		return nil, fmt.Errorf("descriptor %d is not valid", fd)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	if _, ok := ln.(*net.UnixListener); !ok {
		ln.Close()
		return nil, fmt.Errorf("descriptor %d is a %s listener, not a Unix one", fd, ln.Addr().Network())
	}
	return ln, nil
}

// ReadyByte is what rayd writes to Config.ReadyFD once it serves.
const ReadyByte = 'R'

// Daemon is a wired rayd, exposed for in-process tests.
type Daemon struct {
	log        *slog.Logger
	State      *sandbox.State
	Supervisor *proc.Supervisor
	Hooks      *hooks.Server
	Code       *codesvc.Service
	Network    *network.Service
	Configure  *configure.Service
	API        http.Handler
	// Envd is the E2B envd port's handler (the E2B shim), served on the
	// listener given to SetEnvdListener.
	Envd   http.Handler
	envdLn net.Listener
	// EnvdCode is the E2B code interpreter port's handler, served on the
	// listener given to SetCodeListener.
	EnvdCode     http.Handler
	codeLn       net.Listener
	privileged   bool
	ownsSup      bool
	sampler      *metrics.Sampler
	egress       *egressParts // the proxy and DNS forwarder when rayd programs the network
	telemetry    *telemetry.Exporter
	mounts       *s3mount.Manager // nil where rayd is not root
	onTerminated func()
	stopOnce     sync.Once
	start        *templatestart.Starter
	lifecycleFields
	sudoFields
}

// New wires a daemon without listening. sup is the process supervisor; nil
// makes one, which the daemon then shuts down when it stops. A program has
// at most one running supervisor (it reaps every child of the process), so
// tests that run several daemons share one.
func New(cfg Config, log *slog.Logger, sup *proc.Supervisor) (*Daemon, error) {
	d := &Daemon{log: log, privileged: os.Geteuid() == 0}
	if sup == nil {
		oomKills, err := oomCounter(cfg, log)
		if err != nil {
			return nil, err
		}
		sup, err = proc.New(proc.Options{Logger: log, OOMKills: oomKills})
		if err != nil {
			return nil, fmt.Errorf("process supervisor: %w", err)
		}
		d.ownsSup = true
	}
	d.Supervisor = sup
	tmpl, err := templatestart.Load(cfg.TemplateConfig)
	if err != nil {
		return nil, err
	}
	d.State = sandbox.New(sandbox.Options{Logger: log, Terminate: d.stopProcesses, Template: tmpl})
	k := cfg.knobs.get()
	d.wireLifecycle(k)
	d.wireEvents(cfg, log)
	d.wireNetwork(cfg, log)
	d.wireTelemetry(cfg, log)
	d.wireS3Mounts(cfg, tmpl, log)
	d.wireConfigure(cfg, log)
	builder := &launch.Builder{
		Resolver:   &identity.Resolver{AllowRoot: cfg.AllowRoot},
		Privileged: d.privileged,
		SelfUID:    uint32(os.Geteuid()),
		// The egress proxy's variables while the policy has host rules,
		// the gateway routes' URLs and the placeholders.
		Env: d.processEnv,
	}
	d.wireSudo(cfg, builder, log)
	d.start = templatestart.New(tmpl, sup, builder, log)
	d.Code = codesvc.New(codesvc.Options{State: d.State, Supervisor: sup, Builder: builder, Logger: log, Eager: cfg.EagerKernel, Preload: cfg.PreloadKernel || cfg.EagerKernel, DetachGrace: k.detachGrace, KernelSpecDirs: k.kernelSpecDirs})
	d.wireHooks(cfg, k, log)
	fsys, err := safefs.New(safefs.Options{Privileged: d.privileged, RaydDirs: []string{cfg.StateDir}})
	if err != nil {
		return nil, fmt.Errorf("file layer: %w", err)
	}
	// The E2B envd surface's file layer: the same rules, envd's metadata
	// namespace, entries and parent directories (safefs.Options.Envd).
	envdFsys, err := safefs.New(safefs.Options{Privileged: d.privileged, RaydDirs: []string{cfg.StateDir}, Envd: true})
	if err != nil {
		return nil, fmt.Errorf("file layer: %w", err)
	}
	healthSvc := d.newHealth(cfg, log, sup)
	processSvc := process.New(d.State, sup, builder, log)
	ptySvc := pty.New(d.State, sup, builder, log)
	filesSvc := files.New(d.State, builder, fsys, log)
	filesSvc.SetPersist(persist.New(persist.Options{
		FS:       fsys,
		Stores:   persist.NewS3Stores(persistConfig(cfg)),
		Logger:   log,
		Producer: "rayd/" + version.Version,
	}))
	// Pre-signed transfers: the URLs come with the calls, rayd keeps no
	// credentials for them.
	filesSvc.SetTransfers(transfer.New(transfer.Options{FS: fsys, SandboxID: d.State.SandboxID, Logger: log, Platform: transferPlatform(cfg)}))
	lifecycleSvc := lifecycle.New(d.deadline)
	// One stream budget for the sandbox, whichever port a stream comes by.
	streams := streamlimit.New(streamlimit.Default)
	d.API = apiserver.Handler(apiserver.Options{
		Authorizer: d.State,
		Logger:     log,
		Holds:      d.deadline.Holds,
		Quiesce:    d.quiesce,
		Streams:    streams,
		Services: []apiserver.Mount{
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewHealthServiceHandler(healthSvc, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewProcessServiceHandler(processSvc, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewPtyServiceHandler(ptySvc, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewFilesystemServiceHandler(filesSvc, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewLifecycleServiceHandler(lifecycleSvc, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewCodeServiceHandler(d.Code, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewNetworkServiceHandler(d.Network, o...)
			},
			func(o ...connect.HandlerOption) (string, http.Handler) {
				return raydv1connect.NewConfigureServiceHandler(d.Configure, o...)
			},
		},
		Extra: map[string]http.Handler{files.HTTPPath: filesSvc.HTTPHandler()},
	})
	d.wireEnvd(filesSvc.WithFS(envdFsys), sup, builder, streams, log)
	if !d.privileged {
		log.Warn("rayd runs without root: processes run as rayd's own user; identity switching and limits that need privileges are refused")
	}
	return d, nil
}

// wireHooks makes the platform's lifecycle hooks (k: the tests' knobs).
func (d *Daemon) wireHooks(cfg Config, k knobs, log *slog.Logger) {
	d.Hooks = hooks.New(hooks.Options{
		Lifecycle:        life{d},
		Logger:           log,
		OnTerminated:     func() { d.terminated() },
		PlatformOverUnix: cfg.hooksOverUnix(),
		PeerOwner:        k.peerOwner,
		// Kernels start only after /run (nothing unique before it): rayd
		// is ready to be snapshotted once it serves.
		Ready:        func() bool { return d.serving.Load() && d.Code.PreloadDone() },
		StaleSuspend: k.staleSuspend,
		WatchdogTick: k.watchdogTick,
		// The network rules are re-verified, and kernels reseed their
		// random streams (and are probed), on resume.
		OnResume: func(ctx context.Context) bool {
			d.Network.OnResume(ctx)
			return d.Code.OnResume(ctx)
		},
	})
}

// newHealth makes the Health service, which reports what the daemon
// supports, its state and its metrics (the sampler it starts here).
func (d *Daemon) newHealth(cfg Config, log *slog.Logger, sup *proc.Supervisor) *health.Service {
	h := health.New(d.State, d.Hooks.Anomalies, []string{"health", "process", "pty", "files", "lifecycle", "code", "network", "configure"})
	h.SetSecretGateway(d.Configure.SecretGatewaySupported())
	h.SetLifecycleEvents(d.Configure.LifecycleEventsSupported())
	h.SetTelemetryExport(d.Configure.TelemetryExportSupported())
	h.SetS3Mounts(d.Configure.S3MountsSupported())
	h.SetKernelReady(d.Code.KernelReady)
	h.SetTemplateStart(d.start.Ready)
	h.SetEgress(d.Network)
	h.SetLifecycle(lifeState{d})
	h.SetIsolation(cfg.Isolation)
	h.SetRootAllowed(cfg.AllowRoot && d.privileged)
	h.SetLimits(cfg.MemoryLimit, uint32(min(cfg.ProcessLimit, math.MaxUint32)))
	h.SetLogs(logring.From(log.Handler()))
	d.sampler = metrics.New(metrics.Options{MemoryLimit: cfg.MemoryLimit, Processes: sup.Live, Logger: log})
	h.SetMetrics(d.sampler)
	return h
}

// wireEnvd makes the E2B envd protocol's handlers (processes and files on
// envdFiles, envd's file layer) and the E2B code interpreter's, sharing
// the API's stream budget.
func (d *Daemon) wireEnvd(envdFiles *files.Service, sup *proc.Supervisor, builder *launch.Builder, streams *streamlimit.Limit, log *slog.Logger) {
	envdHTTP := envdhttp.New(d.State, envdFiles, d.sampler.Current)
	envdProcessSvc := envdprocess.New(d.State, sup, builder, log)
	envdFSSvc := envdfs.New(d.State, envdFiles)
	d.Envd = lazyHandler(func() http.Handler {
		return apiserver.EnvdHandler(apiserver.Options{
			Authorizer: d.State,
			Logger:     log,
			Holds:      d.deadline.Holds,
			Quiesce:    d.quiesce,
			Streams:    streams,
			Services: []apiserver.Mount{
				func(o ...connect.HandlerOption) (string, http.Handler) {
					return processconnect.NewProcessHandler(envdProcessSvc, o...)
				},
				func(o ...connect.HandlerOption) (string, http.Handler) {
					return filesystemconnect.NewFilesystemHandler(envdFSSvc, o...)
				},
			},
			Extra: envdHTTP.Routes(),
		})
	})
	envdCode := envdcode.New(d.Code)
	d.EnvdCode = lazyHandler(func() http.Handler {
		return apiserver.EnvdHandler(apiserver.Options{
			Authorizer: d.State,
			Logger:     log,
			Holds:      d.deadline.Holds,
			Quiesce:    d.quiesce,
			Streams:    streams,
			Extra:      envdCode.Routes(),
		})
	})
}

// lazyHandler returns a handler that build makes on its first request.
// E2B's ports are served in every sandbox but used only by E2B clients:
// a sandbox nobody reaches through E2B never builds their Connect
// handlers, which took about 1 ms of New's 5 in a fresh process (its
// first New: 4.9-5.9 ms before, 3.8-4.7 ms after).
func lazyHandler(build func() http.Handler) http.Handler {
	get := sync.OnceValue(build)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { get().ServeHTTP(w, r) })
}

func (d *Daemon) terminated() {
	if d.onTerminated != nil {
		d.onTerminated()
	}
}

// stopProcesses sends SIGTERM to every user process group, then SIGKILL
// after the grace period, and waits for them.
func (d *Daemon) stopProcesses(ctx context.Context) {
	if !d.ownsSup {
		return
	}
	d.stopOnce.Do(func() {
		d.Supervisor.Shutdown(ctx, terminateGrace)
	})
}

// SetEnvdListener makes Serve also serve E2B's envd protocol (Envd) on
// ln. Call it before Serve.
func (d *Daemon) SetEnvdListener(ln net.Listener) { d.envdLn = ln }

// SetCodeListener makes Serve also serve the E2B code interpreter's API
// (EnvdCode) on ln. Call it before Serve.
func (d *Daemon) SetCodeListener(ln net.Listener) { d.codeLn = ln }

// Serve serves the API on apiLn and the hooks on each of hooksLns (and the
// E2B shim's envd and code-interpreter ports on the listeners given to
// SetEnvdListener and SetCodeListener) until ctx ends, then stops user
// processes.
func (d *Daemon) Serve(ctx context.Context, apiLn net.Listener, hooksLns ...net.Listener) error {
	d.sampler.Start()
	defer d.sampler.Stop()
	d.serveEgress(ctx)
	d.Code.Preload()
	d.serving.Store(true)
	defer d.Hooks.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3+len(hooksLns))
	wg.Add(1 + len(hooksLns))
	go func() {
		defer wg.Done()
		errc <- apiserver.Serve(ctx, apiLn, d.API, d.log, 2*time.Second)
	}()
	if d.envdLn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- apiserver.Serve(ctx, d.envdLn, d.Envd, d.log, 2*time.Second)
		}()
	}
	if d.codeLn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- apiserver.Serve(ctx, d.codeLn, d.EnvdCode, d.log, 2*time.Second)
		}()
	}
	for _, ln := range hooksLns {
		go func() {
			defer wg.Done()
			errc <- d.Hooks.Serve(ctx, ln)
		}()
	}
	d.serveSudo(ctx, &wg)
	var first error
	select {
	case first = <-errc:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	// Kernels first: their directories and sockets go with them.
	d.Code.Close()
	d.Configure.Close()
	d.telemetry.Stop()
	sctx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelStop()
	d.stopProcesses(sctx)
	d.endEvents()
	d.log.Info("rayd stopped")
	return first
}
