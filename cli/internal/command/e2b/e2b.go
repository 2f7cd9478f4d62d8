// Package e2b is `rayito e2b`: serve E2B's API in front of the configured
// platform (serve) and manage the gateway's API keys (key create).
package e2b

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	e2bapi "github.com/rayito-dev/rayito/e2b"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// KeyEnv is the variable that can hold one API key instead of (or
// beside) the keys file.
const KeyEnv = "RAYITO_E2B_API_KEY"

// DefaultAddr is where `rayito e2b serve` listens by default: E2B's
// debug-mode API address.
const DefaultAddr = "127.0.0.1:3000"

// maxKeysFile bounds the keys file.
const maxKeysFile = 1 << 20

// Command returns `rayito e2b`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "e2b",
		Usage: "serve E2B's API, so that the official E2B SDKs drive Rayito sandboxes (see docs/e2b.md)",
		Commands: []*cli.Command{
			serveCommand(f),
			{
				Name:     "key",
				Usage:    "manage the E2B gateway's API keys",
				Commands: []*cli.Command{keyCreateCommand(f)},
			},
		},
	}
}

// DefaultKeysFile is the keys file for the environment getenv reads:
// $XDG_CONFIG_HOME/rayito/e2b-keys, else ~/.config/rayito/e2b-keys.
func DefaultKeysFile(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rayito", "e2b-keys"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("cannot locate the E2B keys file: set HOME or XDG_CONFIG_HOME, or pass --keys")
	}
	return filepath.Join(home, ".config", "rayito", "e2b-keys"), nil
}

// DefaultSnapshotDir is where the gateway keeps its snapshots for the
// environment getenv reads: $XDG_STATE_HOME/rayito/e2b-snapshots, else
// ~/.local/state/rayito/e2b-snapshots.
func DefaultSnapshotDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rayito", "e2b-snapshots"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("cannot locate the E2B snapshot directory: set HOME or XDG_STATE_HOME, or pass --snapshot-dir")
	}
	return filepath.Join(home, ".local", "state", "rayito", "e2b-snapshots"), nil
}

func snapshotDirFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "snapshot-dir", Usage: "keep the gateway's snapshots (checkpoints of /home/user, docs/persistence.md) in `DIR`, made 0700 (default: $XDG_STATE_HOME/rayito/e2b-snapshots or ~/.local/state/rayito/e2b-snapshots)"}
}

func snapshotDir(f *cliutil.Factory, cmd *cli.Command) (string, error) {
	if p := cmd.String("snapshot-dir"); p != "" {
		return p, nil
	}
	return DefaultSnapshotDir(f.Getenv)
}

func keysFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "keys", Usage: "the API keys `FILE`: sha256 hex lines, mode 0600 (default: $XDG_CONFIG_HOME/rayito/e2b-keys or ~/.config/rayito/e2b-keys)"}
}

func keysPath(f *cliutil.Factory, cmd *cli.Command) (string, error) {
	if p := cmd.String("keys"); p != "" {
		return p, nil
	}
	return DefaultKeysFile(f.Getenv)
}

// checkPrivate refuses a keys file that is a symbolic link, not a regular
// file, readable or writable by the group or others, or another user's.
func checkPrivate(path string, fi os.FileInfo) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refusing it", path)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is accessible by the group or others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to another user", path)
	}
	return nil
}

// LoadKeys reads the accepted key hashes: the lines of the keys file at
// path (a missing file is no keys) and the key in RAYITO_E2B_API_KEY.
// At least one is required.
func LoadKeys(getenv func(string) string, path string) ([][32]byte, error) {
	var out [][32]byte
	if k := getenv(KeyEnv); k != "" {
		out = append(out, e2bapi.HashAPIKey(k))
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := checkPrivate(path, fi); err != nil {
			return nil, err
		}
		fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		b, err := io.ReadAll(io.LimitReader(fh, maxKeysFile+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxKeysFile {
			return nil, fmt.Errorf("%s is larger than %d bytes", path, maxKeysFile)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			h, err := hex.DecodeString(line)
			if err != nil || len(h) != 32 {
				return nil, fmt.Errorf("%s:%d: not a sha256 in hex (the file holds hashes, never keys)", path, n)
			}
			out = append(out, [32]byte(h))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no E2B API key is configured: create one with `rayito e2b key create` (or set %s)", KeyEnv)
	}
	return out, nil
}

// appendKey adds a key's hash to the keys file, creating it (and its
// directory) private.
func appendKey(path, key string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil {
		if err := checkPrivate(path, fi); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	fi, err := fh.Stat()
	if err == nil {
		err = checkPrivate(path, fi)
	}
	if err == nil {
		h := e2bapi.HashAPIKey(key)
		_, err = fmt.Fprintln(fh, hex.EncodeToString(h[:]))
	}
	if err == nil {
		err = fh.Sync()
	}
	return errors.Join(err, fh.Close())
}

func keyCreateCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "make a new API key: printed once, only its hash is stored",
		Flags: []cli.Flag{keysFlag(), cliutil.JSONFlag()},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Present() {
				return cliutil.Usagef("unexpected argument %q", cmd.Args().First())
			}
			path, err := keysPath(f, cmd)
			if err != nil {
				return err
			}
			key, err := e2bapi.NewAPIKey()
			if err != nil {
				return err
			}
			if err := appendKey(path, key); err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]string{"key": key, "keys_file": path})
			}
			fmt.Fprintln(f.IO.Out, key)
			fmt.Fprintf(f.IO.Err, "stored its sha256 in %s; the key is not shown again: export E2B_API_KEY=<it>\n", path)
			return nil
		},
	}
}

// IsLoopback says whether addr (host:port) listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NonLoopbackWarning is printed when the gateway listens beyond loopback.
const NonLoopbackWarning = "rayito: WARNING: the E2B gateway listens beyond loopback on plain HTTP: E2B's SDKs send the API key and sandbox tokens in clear; put TLS in front of it"

// Serve serves the E2B API on ln until ctx ends: over TLS with tlsCfg,
// else plain HTTP.
func Serve(ctx context.Context, ln net.Listener, opts e2bapi.Options, tlsCfg *tls.Config) error {
	return serve(ctx, ln, opts, tlsCfg, nil)
}

// serve is Serve, plus the debug sandbox's debugPorts on localhost (plain
// HTTP, as E2B's debug mode links them).
func serve(ctx context.Context, ln net.Listener, opts e2bapi.Options, tlsCfg *tls.Config, debugPorts []int) error {
	srv, err := e2bapi.New(ctx, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	for _, p := range debugPorts {
		h, err := srv.DebugPortHandler(p)
		if err != nil {
			return cliutil.Usage(err)
		}
		// localhost is 127.0.0.1 and, where the machine has it, ::1:
		// clients may try either.
		lns, err := listenLocalhost(p)
		if err != nil {
			return fmt.Errorf("--debug-port %d: %w", p, err)
		}
		for _, dl := range lns {
			ds := &http.Server{Handler: h, ReadHeaderTimeout: 15 * time.Second, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
			go func() { _ = ds.Serve(dl) }()
			defer ds.Close()
		}
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	if tlsCfg != nil {
		hs.TLSConfig = tlsCfg
		ln = tls.NewListener(ln, tlsCfg)
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-done
	return nil
}

// ParseTemplates reads --template E2B_ID=RAYITO_TEMPLATE (E2B_ID may be
// empty: the default).
func ParseTemplates(specs []string) (map[string]string, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || v == "" {
			return nil, cliutil.Usagef("--template wants E2B_ID=RAYITO_TEMPLATE, got %q", s)
		}
		out[k] = v
	}
	return out, nil
}

func serveCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve E2B's control-plane API and sandbox router in front of the configured platform (RAYITO_BACKEND, RAYITO_ENDPOINT, AWS)",
		Flags: serveFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runServe(ctx, f, cmd)
		},
	}
}

// serveFlags are serve's flags.
func serveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "addr", Value: DefaultAddr, Usage: "listen on `HOST:PORT` (E2B_API_URL and E2B_SANDBOX_URL are both http://HOST:PORT)"},
		&cli.StringSliceFlag{Name: "template", Usage: "map E2B's templateID to a Rayito template: `E2B_ID=RAYITO_TEMPLATE` (repeatable; =T is the default for any other; none: every templateID gets the platform's default; the local platform has local and local-root, where root is allowed)"},
		keysFlag(),
		snapshotDirFlag(),
		&cli.StringFlag{Name: "domain", Usage: "report `DOMAIN` (a DNS name, optionally :PORT) as the sandboxes' domain: getHost(port) and presigned file links are <port>-<id>.DOMAIN, which the gateway routes (default with --tls: " + LocalDomain + ":PORT)"},
		&cli.BoolFlag{Name: "tls", Usage: "serve HTTPS with a certificate for DOMAIN and *.DOMAIN from the gateway's own CA, made once under $XDG_STATE_HOME/rayito/e2b-tls (or ~/.local/state/rayito/e2b-tls), which can sign for nothing else; trust its ca.pem (NODE_EXTRA_CA_CERTS)"},
		&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS with the certificate in `FILE` (PEM, for DOMAIN and *.DOMAIN; with --tls-key and --domain)"},
		&cli.StringFlag{Name: "tls-key", Usage: "the private key of --tls-cert, in `FILE` (PEM)"},
		&cli.StringFlag{Name: "debug-sandbox", Usage: "route E2B's debug-mode id debug_sandbox_id to the sandbox `ID` (or a unique prefix of it; E2B_DEBUG=true)"},
		&cli.IntSliceFlag{Name: "debug-port", Usage: "with --debug-sandbox, serve the sandbox's `PORT` on localhost:PORT, where debug mode's getHost(PORT) points (repeatable)"},
		&cli.BoolFlag{Name: "allow-non-loopback", Usage: "allow an --addr beyond loopback without TLS (keys and tokens travel in clear)"},
		&cli.BoolFlag{Name: "debug", Usage: "log at debug level"},
		cliutil.JSONFlag(),
	}
}

// runServe checks serve's flags and the platform, then serves until ctx
// ends or a signal comes.
func runServe(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) error {
	if cmd.Args().Present() {
		return cliutil.Usagef("unexpected argument %q", cmd.Args().First())
	}
	addr := cmd.String("addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return cliutil.Usagef("--addr wants HOST:PORT, got %q", addr)
	}
	debugPorts := cmd.IntSlice("debug-port")
	if len(debugPorts) > 0 && cmd.String("debug-sandbox") == "" {
		return cliutil.Usagef("--debug-port needs --debug-sandbox")
	}
	for _, p := range debugPorts {
		if p < 1 || p > 65535 || p == 9000 {
			return cliutil.Usagef("--debug-port %d: want a port from 1 to 65535, not 9000 (the platform's hooks)", p)
		}
	}
	exp, err := NewExposure(f.Getenv, "", addr, cmd.String("domain"), cmd.Bool("tls"), cmd.String("tls-cert"), cmd.String("tls-key"))
	if err != nil {
		return err
	}
	if !IsLoopback(addr) && exp.TLS == nil {
		if !cmd.Bool("allow-non-loopback") {
			return cliutil.Usagef("--addr %s is not loopback: E2B's SDKs send the API key in clear over plain HTTP; serve TLS (--tls, --tls-cert) or pass --allow-non-loopback to do it anyway", addr)
		}
		fmt.Fprintln(f.IO.Err, NonLoopbackWarning)
	}
	templates, err := serveTemplates(f, cmd)
	if err != nil {
		return err
	}
	path, err := keysPath(f, cmd)
	if err != nil {
		return err
	}
	keys, err := LoadKeys(f.Getenv, path)
	if err != nil {
		return err
	}
	snaps, err := snapshotDir(f, cmd)
	if err != nil {
		return err
	}
	t, err := platform.Existing(ctx, f.Getenv)
	if err != nil {
		return err
	}
	debugID := cmd.String("debug-sandbox")
	if debugID != "" {
		// An id or a unique prefix of one, as everywhere.
		if debugID, err = cliutil.ResolveID(ctx, debugID, cliutil.PlatformCandidates(t.Options)); err != nil {
			return err
		}
	}
	dir, err := rayito.TokenStoreDir(f.Getenv)
	if err != nil {
		return err
	}
	log := cliutil.ServerLogger(f.IO.Err, cmd.Bool("debug"), cmd.Bool("json"))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("E2B gateway serving", append(exp.Env(ln.Addr().String()), "keys", len(keys))...)
	return serve(ctx, ln, e2bapi.Options{
		SDK:            append(t.Options, rayito.WithTokenStoreDir(dir)),
		APIKeyHashes:   keys,
		Templates:      templates,
		Logger:         log,
		DebugSandboxID: debugID,
		SnapshotDir:    snaps,
		Domain:         exp.Domain,
	}, exp.TLS, debugPorts)
}

// serveTemplates reads --template and checks every template it names,
// and RAYITO_TEMPLATE, against the platform (the local platform honours
// no template but its own).
func serveTemplates(f *cliutil.Factory, cmd *cli.Command) (map[string]string, error) {
	templates, err := ParseTemplates(cmd.StringSlice("template"))
	if err != nil {
		return nil, err
	}
	// The local platform honours no template but its own: one
	// mapped to another would be reported and not run.
	backend, err := platform.Backend(f.Getenv)
	if err != nil {
		return nil, err
	}
	for _, t := range templates {
		if err := cliutil.CheckTemplate(backend, "--template", t); err != nil {
			return nil, err
		}
	}
	if err := cliutil.CheckTemplate(backend, rayito.EnvTemplate, f.Getenv(rayito.EnvTemplate)); err != nil {
		return nil, err
	}
	return templates, nil
}

// listenLocalhost listens on 127.0.0.1:port, and on [::1]:port where the
// machine has IPv6 loopback.
func listenLocalhost(port int) ([]net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	lns := []net.Listener{ln}
	if ln6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		lns = append(lns, ln6)
	}
	return lns, nil
}
