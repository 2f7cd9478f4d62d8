// Package host is the agent host: it prepares the agent's environment
// (the service token and the secret variables taken out of it, the
// secret values fetched and checked, the Python logging hook), supervises
// the agent as a child process serving HTTP on a loopback port, and
// serves the runtime contract in front of it: GET /ping and POST
// /invocations (AgentCore's), with the service token checked on
// MicroVMs.
package host

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// Target is where the host runs.
type Target string

// The targets.
const (
	// TargetAgentCore is Bedrock AgentCore: invocations are signed by AWS
	// (no service token), secrets come from Secrets Manager with the
	// runtime role.
	TargetAgentCore Target = "agentcore"
	// TargetMicroVM is a Rayito sandbox: invocations reach the host
	// through the sandbox's endpoint and carry the service token; the
	// caller put the secret values in the host's environment.
	TargetMicroVM Target = "microvm"
)

// MaxPayloadBytes bounds an invocation's body (AgentCore's limit).
const MaxPayloadBytes = 100 << 20

// Config is the host's configuration.
type Config struct {
	Target Target
	// Listen is the contract's address (default ":8080", AgentCore's).
	Listen string
	// Command is the agent and its arguments; it serves HTTP on
	// 127.0.0.1:$PORT (GET /ping, POST /invocations).
	Command []string
	// Dir is the agent's working directory (default the host's).
	Dir string
	// ChildPort is the agent's loopback port (default 8081).
	ChildPort int
	// User, when set, is the user (name or uid) the agent runs as: the
	// host runs as root and the agent cannot read its environment (the
	// service token). HOME, USER and LOGNAME follow it.
	User string
	// Token is the service token when the host read it from its stdin
	// (--token-stdin: no environment shows it; else it comes from
	// RAYITO_AGENT_SERVICE_TOKEN, which code of the same user can read in
	// /proc). MicroVMs only.
	Token string
	// Environ is the host's environment (os.Environ()).
	Environ []string
	// Secrets reads secrets on AgentCore.
	Secrets SecretSource
	// TempDir holds the Python hook (default os.TempDir()).
	TempDir string
	// Stdout and Stderr receive the agent's output.
	Stdout, Stderr io.Writer
	// Logger is the host's log (INFO and above; never a value, a URL, a
	// header, a payload or a secret's name).
	Logger *slog.Logger
	// StartTimeout bounds the agent's start, until its /ping answers 200
	// (default 60 s); a start that takes longer is restarted.
	StartTimeout time.Duration
}

// Host is a prepared agent host.
type Host struct {
	cfg   Config
	token string
	sup   *supervisor
	busy  atomic.Int64
	proxy *httputil.ReverseProxy
	// hookDir holds the Python hook; Run removes it.
	hookDir string
}

// ErrConfig is a host configuration error.
var ErrConfig = errors.New("agent host configuration")

// New prepares the host: it checks cfg, reads the service token and the
// secret variables from cfg.Environ (fetching the values on AgentCore),
// writes the Python hook and builds the agent's environment. It starts
// nothing. A secret-env failure is a *secretenv.Error; New logs only
// secret_env_loaded with the count.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Listen == "" {
		cfg.Listen = ":8080"
	}
	if cfg.ChildPort == 0 {
		cfg.ChildPort = 8081
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	switch {
	case cfg.Target != TargetAgentCore && cfg.Target != TargetMicroVM:
		return nil, fmt.Errorf("%w: target must be agentcore or microvm", ErrConfig)
	case len(cfg.Command) == 0 || cfg.Command[0] == "":
		return nil, fmt.Errorf("%w: no agent command", ErrConfig)
	case cfg.ChildPort < 1 || cfg.ChildPort > 65535:
		return nil, fmt.Errorf("%w: the agent's port must be 1 to 65535", ErrConfig)
	case slices.ContainsFunc(cfg.Command, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }):
		return nil, fmt.Errorf("%w: a NUL byte in the agent command", ErrConfig)
	}
	if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || port == strconv.Itoa(cfg.ChildPort) {
		return nil, fmt.Errorf("%w: the listen address must be host:port, another port than the agent's", ErrConfig)
	}
	env, err := prepareEnv(ctx, cfg.Target, cfg.Environ, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Token != "" && env.token != "":
		return nil, fmt.Errorf("%w: the service token comes from stdin or %s, not both", ErrConfig, TokenVariable)
	case cfg.Token != "":
		env.token = cfg.Token
	}
	switch {
	case cfg.Target == TargetMicroVM && len(env.token) < 32:
		return nil, fmt.Errorf("%w: on MicroVMs the host needs the service token (at least 32 bytes) on stdin (--token-stdin) or in %s", ErrConfig, TokenVariable)
	case cfg.Target == TargetAgentCore && env.token != "":
		return nil, fmt.Errorf("%w: no service token on AgentCore (invocations are signed by AWS): unset %s", ErrConfig, TokenVariable)
	}
	var u *agentUser
	if cfg.User != "" {
		if u, err = lookupUser(cfg.User); err != nil {
			return nil, err
		}
	}
	hook, err := writePythonHook(cfg.TempDir)
	if err != nil {
		return nil, fmt.Errorf("agent host: the Python hook: %w", err)
	}
	childEnv := setenv(env.env, "PORT", strconv.Itoa(cfg.ChildPort))
	childEnv = setenv(childEnv, "PYTHONPATH", pythonPath(hook, env.env))
	childEnv = setenv(childEnv, "PYTHONUNBUFFERED", "1")
	var cred *syscall.Credential
	if u != nil {
		cred = u.cred
		childEnv = setenv(childEnv, "HOME", u.home)
		childEnv = setenv(childEnv, "USER", u.name)
		childEnv = setenv(childEnv, "LOGNAME", u.name)
	}
	cfg.Logger.Info("secret_env_loaded", "count", len(env.values))
	h := &Host{cfg: cfg, token: env.token, hookDir: hook}
	h.sup = &supervisor{
		command: cfg.Command, dir: cfg.Dir, env: childEnv, port: cfg.ChildPort, cred: cred,
		stdout: cfg.Stdout, stderr: cfg.Stderr, log: cfg.Logger,
		redactor: secretenv.NewRedactor(env.values), startTimeout: cfg.StartTimeout,
	}
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ChildPort))}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path, r.Out.URL.RawPath = "/invocations", ""
			r.Out.Header.Del("Authorization")
			r.Out.Header.Del("X-Forwarded-For")
		},
		FlushInterval: -1,
		// Its own messages could carry a request's details: none is logged.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			writeJSONError(w, http.StatusBadGateway, "agent_unavailable")
		},
	}
	return h, nil
}

// Run starts the agent and serves the contract on ln until ctx ends; then
// it stops the agent (SIGTERM to its process group, SIGKILL 10 s later)
// and returns.
func (h *Host) Run(ctx context.Context, ln net.Listener) error {
	supDone := make(chan struct{})
	go func() {
		defer close(supDone)
		h.sup.run(ctx)
	}()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.cfg.Logger.Info("agent_host_listening", "target", string(h.cfg.Target))
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-supDone
	_ = os.Chmod(h.hookDir, 0o755)
	_ = os.RemoveAll(h.hookDir)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Listen is the contract's address.
func (h *Host) Listen() string { return h.cfg.Listen }

// ServeHTTP serves GET /ping and POST /invocations.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ping":
		if r.Method != http.MethodGet {
			writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed")
			return
		}
		h.ping(w)
	case "/invocations":
		if r.Method != http.MethodPost {
			writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed")
			return
		}
		if h.cfg.Target == TargetMicroVM && !h.authorized(r) {
			writeJSONError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		if !h.sup.ready.Load() {
			writeJSONError(w, http.StatusServiceUnavailable, "agent_starting")
			return
		}
		if r.ContentLength > MaxPayloadBytes {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "payload_too_large")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxPayloadBytes)
		h.busy.Add(1)
		defer h.busy.Add(-1)
		h.proxy.ServeHTTP(w, r)
	default:
		writeJSONError(w, http.StatusNotFound, "not_found")
	}
}

// authorized checks the service token (Authorization: Bearer TOKEN) in
// constant time.
func (h *Host) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(h.token)) == 1
}

// ping answers AgentCore's health check: Healthy, HealthyBusy while an
// invocation runs (or when the agent's own /ping says so), 503 while the
// agent is not up.
func (h *Host) ping(w http.ResponseWriter) {
	status := "Healthy"
	switch {
	case !h.sup.ready.Load():
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "Unhealthy", "time_of_last_update": h.sup.changed.Load()})
		return
	case h.busy.Load() > 0 || h.sup.busy.Load():
		status = "HealthyBusy"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "time_of_last_update": h.sup.changed.Load()})
}

// writeJSONError writes {"error": code}.
func writeJSONError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}
