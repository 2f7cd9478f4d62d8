package local

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	e2bcmd "github.com/rayito-dev/rayito/cli/internal/command/e2b"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/e2b"
	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// e2bAddrFlag serves E2B's API beside the platform.
func e2bAddrFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "e2b-addr", Usage: "also serve E2B's API (as rayito e2b serve does) on `HOST:PORT`, a loopback address (keys: the E2B keys file or " + e2bcmd.KeyEnv + "; snapshots: $XDG_STATE_HOME/rayito/e2b-snapshots or ~/.local/state/rayito/e2b-snapshots)"}
}

// The gateway's other flags: its domain, its TLS and its templates.
func e2bDomainFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "e2b-domain", Usage: "the E2B gateway reports `DOMAIN` as the sandboxes' domain: getHost(port) and file links are <port>-<id>.DOMAIN (default with --e2b-tls: " + e2bcmd.LocalDomain + ":PORT)"}
}

func e2bTLSFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "e2b-tls", Usage: "the E2B gateway serves HTTPS, as rayito e2b serve --tls does (its own CA, under $XDG_STATE_HOME/rayito/e2b-tls; clients trust its ca.pem)"}
}

func e2bTemplateFlag() *cli.StringSliceFlag {
	return &cli.StringSliceFlag{Name: "e2b-template", Usage: "the E2B gateway maps E2B's templateID to a template of the platform: `MAP` is E2B_ID=TEMPLATE (repeatable, as rayito e2b serve --template)"}
}

// e2bGateway is the configuration of the gateway beside the platform.
type e2bGateway struct {
	keys      [][32]byte
	exposure  e2bcmd.Exposure
	templates map[string]string
}

// e2bGatewayFor checks the gateway's flags (all of them need
// --e2b-addr) and loads its keys and TLS.
func e2bGatewayFor(f *cliutil.Factory, cmd *cli.Command) (*e2bGateway, error) {
	addr := cmd.String(e2bAddrFlag().Name)
	if addr == "" {
		for _, name := range []string{e2bDomainFlag().Name, e2bTLSFlag().Name, e2bTemplateFlag().Name} {
			if cmd.IsSet(name) {
				return nil, cliutil.Usagef("--%s needs --e2b-addr", name)
			}
		}
		return nil, nil
	}
	keys, err := e2bKeysFor(f, addr)
	if err != nil {
		return nil, err
	}
	templates, err := e2bcmd.ParseTemplates(cmd.StringSlice(e2bTemplateFlag().Name))
	if err != nil {
		return nil, err
	}
	for _, t := range templates {
		if err := cliutil.CheckTemplate(rayito.BackendLocal, "--e2b-template", t); err != nil {
			return nil, err
		}
	}
	exp, err := e2bcmd.NewExposure(f.Getenv, "e2b-", addr, cmd.String(e2bDomainFlag().Name), cmd.Bool(e2bTLSFlag().Name), "", "")
	if err != nil {
		return nil, err
	}
	return &e2bGateway{keys: keys, exposure: exp, templates: templates}, nil
}

// e2bKeysFor checks --e2b-addr and loads the gateway's keys.
func e2bKeysFor(f *cliutil.Factory, addr string) ([][32]byte, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, cliutil.Usagef("--e2b-addr wants HOST:PORT, got %q", addr)
	}
	if !e2bcmd.IsLoopback(addr) {
		return nil, cliutil.Usagef("--e2b-addr %s is not loopback: E2B's SDKs send the API key in clear over plain HTTP (use `rayito e2b serve --allow-non-loopback` to do it anyway)", addr)
	}
	path, err := e2bcmd.DefaultKeysFile(f.Getenv)
	if err != nil {
		return nil, err
	}
	return e2bcmd.LoadKeys(f.Getenv, path)
}

// unisolatedFlag opts in to sandboxes that are NOT isolated, where the
// platform cannot isolate any.
func unisolatedFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "unisolated", Usage: "where sandboxes cannot be isolated (not root, no unprivileged user namespaces), start them anyway as plain processes of this user, NOT isolated (also " + platform.UnisolatedEnv + "=1)"}
}

// awsQuotasFlag() throttles the platform's API at the AWS service's quotas
// instead of ten times them.
func awsQuotasFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "aws-quotas", Usage: "throttle the API at the AWS quotas (RunMicrovm 5/s, ...) instead of 10x them, to try a client against the service's limits"}
}

// defaultPrebooted is --prebooted's default: how many sandboxes a root
// platform keeps booted ahead of requests.
const defaultPrebooted = 2

// prebootedFlag sets the size of the platform's pool of pre-booted
// sandboxes.
func prebootedFlag() *cli.IntFlag {
	return &cli.IntFlag{Name: "prebooted", Value: defaultPrebooted,
		Usage: fmt.Sprintf("keep `N` sandboxes booted ahead of requests, so that a create hands one out at once (0 to %d; root platform only: 0 without root unless set)", localvm.MaxPrebooted)}
}

// prebooted checks --prebooted and returns the value for
// localvm.Options.Prebooted. Without root the default is 0: the pool
// needs the root platform, and an ordinary user who did not ask for one
// gets no warning about it; an explicit value is passed on (the platform
// says once why it keeps no pool).
func prebooted(cmd *cli.Command) (int, error) {
	n := cmd.Int(prebootedFlag().Name)
	if n < 0 || n > localvm.MaxPrebooted {
		return 0, cliutil.Usagef("--prebooted must be between 0 and %d, got %d", localvm.MaxPrebooted, n)
	}
	if !cmd.IsSet(prebootedFlag().Name) && os.Geteuid() != 0 {
		return 0, nil
	}
	return int(n), nil
}

// eventsAllowLoopbackFlag lets the events pipeline deliver webhooks to
// loopback receivers (localvm.Options.EventsAllowLoopback).
func eventsAllowLoopbackFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "events-allow-loopback", Usage: "let webhooks target this machine's loopback (a literal 127.x or ::1 address in the URL); every other private address stays blocked"}
}

// eventsCAFlag adds PEM roots for webhook TLS (localvm.Options.EventsRootCAs).
func eventsCAFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "events-ca", Usage: "trust the PEM certificates in `FILE` for webhook TLS, besides the system's (a local receiver's CA)"}
}

// eventsCA reads --events-ca (nil without it).
func eventsCA(cmd *cli.Command) ([]byte, error) {
	path := cmd.String(eventsCAFlag().Name)
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cliutil.Usagef("--events-ca: %v", err)
	}
	if !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, cliutil.Usagef("--events-ca: %s holds no PEM certificate", path)
	}
	return b, nil
}

// sandboxBinaryFlag names the executable sandboxes start from
// (localvm.Options.SandboxBinary).
func sandboxBinaryFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "sandbox-binary", Usage: "start every sandbox from `FILE`, a rayito-sandbox of this release (smaller than rayito: sandboxes start sooner and idle in less memory); default: $" + platform.SandboxBinaryEnv + ", else the rayito-sandbox beside rayito when there is one, else rayito itself"}
}

// kernelStartFlag picks when each sandbox's default Python kernel starts
// (localvm.Options.KernelStart).
func kernelStartFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "kernel-start", Value: "lazy",
		Usage: "when each sandbox's Python kernel starts: `MODE` lazy (at the first cell, 0.5-0.7 s), preload (ipykernel loaded at boot: a first cell of about 0.1 s, for about 50 MB per sandbox until then) or eager (preloaded and started at once)",
		Validator: func(v string) error {
			switch v {
			case "lazy", "preload", "eager":
				return nil
			}
			return cliutil.Usagef("--kernel-start must be lazy, preload or eager, not %q", v)
		}}
}

func serveCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the local platform in the foreground (Ctrl-C stops it and its sandboxes)",
		Flags: serveFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runServe(ctx, f, cmd)
		},
	}
}

// serveFlags are serve's flags.
func serveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "addr", Usage: "listen on `HOST:PORT` (default: the endpoint's, " + localvm.DefaultAddr + ")"},
		stateDirFlag(),
		awsQuotasFlag(),
		prebootedFlag(),
		kernelStartFlag(),
		sandboxBinaryFlag(),
		eventsAllowLoopbackFlag(),
		eventsCAFlag(),
		&cli.BoolFlag{Name: "keep-sandboxes", Usage: "leave sandboxes running on exit (a restarted platform re-adopts them)"},
		&cli.BoolFlag{Name: "debug", Usage: "log at debug level"},
		unisolatedFlag(),
		e2bAddrFlag(),
		e2bDomainFlag(),
		e2bTLSFlag(),
		e2bTemplateFlag(),
		cliutil.JSONFlag(),
	}
}

// runServe runs the local platform, and the E2B gateway with --e2b-addr,
// until a signal comes (or ctx ends), then ends its sandboxes while still
// serving (unless --keep-sandboxes), stops serving and closes it.
func runServe(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) error {
	pool, err := prebooted(cmd)
	if err != nil {
		return err
	}
	addr, otherUser, err := serveAddr(ctx, f, cmd)
	if err != nil {
		return err
	}
	lg, err := openLocalGateway(f, cmd)
	if err != nil {
		return err
	}
	if lg != nil {
		defer lg.ln.Close()
	}
	log := cliutil.ServerLogger(f.IO.Err, cmd.Bool("debug"), cmd.Bool("json"))
	sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A platform owns the sandboxes of its state dir only: another
	// one with another state dir (XDG_STATE_HOME, --state-dir) runs
	// beside it without touching them.
	unisolated := cmd.Bool(unisolatedFlag().Name) || f.Getenv(platform.UnisolatedEnv) == "1"
	evCA, err := eventsCA(cmd)
	if err != nil {
		return err
	}
	bin, err := platform.SandboxBinary(f.Getenv, cmd.String(sandboxBinaryFlag().Name), func(w string) { log.Warn(w) })
	if err != nil {
		return err
	}
	srv, err := localvm.New(sig, localvm.Options{Addr: addr, StateDir: stateDir(cmd), Logger: log, AWSQuotas: cmd.Bool(awsQuotasFlag().Name), AllowUnisolated: unisolated, Prebooted: pool, KernelStart: cmd.String(kernelStartFlag().Name),
		EventsAllowLoopback: cmd.Bool(eventsAllowLoopbackFlag().Name), EventsRootCAs: evCA, SandboxBinary: bin})
	if err != nil {
		return err
	}
	if bin != "" {
		log.Info("sandboxes start from " + bin)
	}
	switch srv.Isolation() {
	case localvm.IsolationNone:
		fmt.Fprintln(f.IO.Err, platform.UnisolatedWarning)
	case localvm.IsolationRootless:
		log.Warn("not root: rootless isolation (user namespaces; one host uid for all sandboxes, loopback-only network, no Internet access, no cgroup limits)")
	}
	if otherUser != "" {
		log.Warn(otherUser + ": serving on a free port instead")
	}
	// On a signal the sandboxes end (unless --keep-sandboxes) while the
	// platform still serves, so that a client following one reads why it
	// ended; then serving stops.
	serving, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		select {
		case <-sig.Done():
		case <-serving.Done():
			return
		}
		if !cmd.Bool("keep-sandboxes") {
			down, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if err := srv.Drain(down); err != nil {
				log.Error("terminating sandboxes", "err", err)
			}
			cancel()
		}
		stopServing()
	}()
	served := make(chan string, 1)
	e2bDone := make(chan error, 1)
	e2bCtx, e2bStop := context.WithCancel(serving)
	defer e2bStop()
	if lg != nil {
		go func() { e2bDone <- lg.serve(e2bCtx, served, log) }()
	} else {
		e2bDone <- nil
	}
	serveErr := srv.ListenAndServe(serving, func(endpoint string) {
		log.Info("local platform serving", "endpoint", endpoint, "state_dir", stateDir(cmd))
		served <- endpoint
	})
	stopServing()
	<-drained
	e2bStop()
	if err := <-e2bDone; err != nil && serveErr == nil {
		log.Error("E2B gateway", "err", err)
	}
	down, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.Close(down); err != nil {
		return err
	}
	if serveErr != nil && sig.Err() == nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// serveAddr is the address to serve on: --addr, or the endpoint's, or a
// free port when another user's platform holds the default one (then
// otherUser says so).
func serveAddr(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) (addr, otherUser string, err error) {
	addr = cmd.String("addr")
	if addr == "" {
		a, err := listenAddr(f)
		if err != nil {
			return "", "", err
		}
		addr = a
		// Another user's platform at the default address: serve
		// on a free port instead (recorded in the state dir, where
		// this user's CLI and SDK look), unless RAYITO_ENDPOINT
		// pins the address.
		ep := platform.Endpoint(f.Getenv)
		if p := platform.ProbeEndpoint(ctx, ep); p.OtherUser && f.Getenv("RAYITO_ENDPOINT") == "" {
			addr, otherUser = "127.0.0.1:0", p.OtherUserText(ep)
		}
	} else if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", cliutil.Usagef("--addr wants HOST:PORT, got %q", addr)
	}
	return addr, otherUser, nil
}

// localGateway is serve's E2B gateway: its configuration, listener, token
// store and snapshot directory.
type localGateway struct {
	gw                *e2bGateway
	ln                net.Listener
	tokens, snapshots string
}

// openLocalGateway listens on --e2b-addr when the gateway is asked for
// (nil when not).
func openLocalGateway(f *cliutil.Factory, cmd *cli.Command) (*localGateway, error) {
	gw, err := e2bGatewayFor(f, cmd)
	if err != nil || gw == nil {
		return nil, err
	}
	lg := &localGateway{gw: gw}
	if lg.tokens, err = rayito.TokenStoreDir(f.Getenv); err != nil {
		return nil, err
	}
	if lg.snapshots, err = e2bcmd.DefaultSnapshotDir(f.Getenv); err != nil {
		return nil, err
	}
	if lg.ln, err = net.Listen("tcp", cmd.String(e2bAddrFlag().Name)); err != nil {
		return nil, fmt.Errorf("--e2b-addr: %w", err)
	}
	return lg, nil
}

// serve serves the gateway once the platform serves at the endpoint
// received on served (its port may be a free one), until ctx ends.
func (lg *localGateway) serve(ctx context.Context, served <-chan string, log *slog.Logger) error {
	var endpoint string
	select {
	case endpoint = <-served:
	case <-ctx.Done():
		return nil
	}
	log.Info("E2B gateway serving", append(lg.gw.exposure.Env(lg.ln.Addr().String()), "keys", len(lg.gw.keys))...)
	return e2bcmd.Serve(ctx, lg.ln, e2b.Options{
		SDK:          []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(endpoint), rayito.WithTokenStoreDir(lg.tokens)},
		APIKeyHashes: lg.gw.keys,
		Templates:    lg.gw.templates,
		Logger:       log,
		SnapshotDir:  lg.snapshots,
		Domain:       lg.gw.exposure.Domain,
	}, lg.gw.exposure.TLS)
}
