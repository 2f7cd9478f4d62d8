package e2b

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// EnvdVersion is the envd version the gateway reports for every sandbox:
// the highest whose features rayd's envd protocol implements (the SDKs
// gate features on it: octet-stream and gzip uploads from 0.5.7, file
// metadata from 0.6.2, includeEntry from 0.6.3, allowNetworkMounts from
// 0.6.4).
const EnvdVersion = "0.6.4"

// ClientID is the clientID of every sandbox (a field E2B deprecated).
const ClientID = "rayito"

// DebugSandboxID is the sandbox id E2B's SDKs use in debug mode
// (E2B_DEBUG=true).
const DebugSandboxID = "debug_sandbox_id"

// DefaultTemplateID is the templateID of a create that names none.
const DefaultTemplateID = "base"

// DefaultTimeout is E2B's default sandbox timeout.
const DefaultTimeout = 300 * time.Second

// MaxLifetime is the longest a sandbox of the gateway lives, running and
// paused time together (Rayito's cap); a timeout may reach a minute less.
const MaxLifetime = 8 * time.Hour

// MaxTimeout is the longest timeout a create, connect or setTimeout may
// ask for: a minute under MaxLifetime, so that rayd acts before the
// platform does.
const MaxTimeout = MaxLifetime - time.Minute

// MaxBodyBytes caps a control-plane request body.
const MaxBodyBytes = 1 << 20

// Options configures a Server.
type Options struct {
	// SDK says how to reach the platform (backend, endpoint, AWS config,
	// token store dir, ...); passed to every rayito call.
	SDK []rayito.Option
	// APIKeyHashes are the sha256 of each accepted X-API-KEY (HashAPIKey).
	// New fails when it is empty: no key is ever accepted then.
	APIKeyHashes [][32]byte
	// Templates maps an E2B templateID to a Rayito template; the "" key
	// is the default for any templateID not in it. A templateID the map
	// does not cover is refused with a 400 naming it. A nil or empty map
	// sends every templateID to the platform's default template.
	Templates map[string]string
	// Logger receives one line per request (route, status, duration,
	// sandbox id): never keys, tokens, headers, envs, bodies, commands or
	// URLs. nil discards.
	Logger *slog.Logger
	// Domain is the domain the sandboxes' hosts are under, reported as
	// E2B's `domain` by create, connect and getInfo: E2B's SDKs build
	// getHost(port) and the presigned file links from it, as
	// <port>-<id>.<Domain> (a Domain may end with :PORT, which the links
	// then carry). The router serves that host form (under any domain).
	// Empty: no domain is reported, and the SDKs use their E2B_DOMAIN.
	Domain string
	// DebugSandboxID, when set, is the sandbox E2B's debug-mode id
	// "debug_sandbox_id" routes to (E2B_DEBUG=true with E2B_SANDBOX_URL);
	// the router adds its access token, which the debug SDK never sends.
	DebugSandboxID string
	// SnapshotDir is where snapshots are kept (POST
	// /sandboxes/{id}/snapshots): a private directory (created when
	// missing, made 0700; a symbolic link, or another user's, is refused).
	// Empty: snapshots answer 501. A snapshot is a checkpoint of the
	// sandbox's HomeDir in Rayito's open checkpoint format (a directory
	// <id>/ with home.tar.gz and manifest.json, as rayd's checkpoints),
	// never its memory.
	SnapshotDir string
	// MaxCopyBytes caps the archive of one fork or snapshot (the tar of
	// HomeDir before compression; a snapshot restored holds files of at
	// most as many bytes); 0 is DefaultMaxCopyBytes.
	MaxCopyBytes int64
	// MaxSnapshots caps how many snapshots SnapshotDir holds; 0 is
	// DefaultMaxSnapshots.
	MaxSnapshots int
	// MaxSnapshotBytes caps the size of all snapshots together; 0 is
	// DefaultMaxSnapshotBytes.
	MaxSnapshotBytes int64
}

// Server serves E2B's control-plane API and its sandbox router.
type Server struct {
	opts    Options
	log     *slog.Logger
	keys    [][32]byte
	plat    platform
	maxCopy int64
	snaps   *snapshotStore // nil: snapshots are off
	tmpl    *templateStore // E2B template builds (templates.go)
	mux     *http.ServeMux
	handler http.Handler

	mu     sync.Mutex
	known  map[string]*record // what the gateway knows of each sandbox
	conns  map[string]*conn   // connected sandboxes, for the router
	closed bool
}

// New makes a Server. It contacts nothing.
func New(ctx context.Context, opts Options) (*Server, error) {
	return newServer(ctx, opts, &rayitoPlatform{opts: opts.SDK})
}

func newServer(_ context.Context, opts Options, p platform) (*Server, error) {
	if len(opts.APIKeyHashes) == 0 {
		return nil, errors.New("e2b: no API key is configured (Options.APIKeyHashes is empty): the gateway would accept none")
	}
	var zero [32]byte
	for _, h := range opts.APIKeyHashes {
		if h == zero {
			return nil, errors.New("e2b: an API key hash is all zeros")
		}
	}
	if opts.Domain != "" && !ValidDomain(opts.Domain) {
		return nil, fmt.Errorf("e2b: invalid domain %q: a DNS name (lower-case letters, digits, dots and hyphens), optionally with :PORT", opts.Domain)
	}
	if opts.DebugSandboxID != "" && !validID(opts.DebugSandboxID) {
		return nil, fmt.Errorf("e2b: invalid debug sandbox id %q", opts.DebugSandboxID)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxCopyBytes < 0 || opts.MaxSnapshots < 0 || opts.MaxSnapshotBytes < 0 {
		return nil, errors.New("e2b: a negative cap of copies or snapshots")
	}
	s := &Server{
		opts: opts, log: log, plat: p,
		keys:  append([][32]byte(nil), opts.APIKeyHashes...),
		known: map[string]*record{}, conns: map[string]*conn{},
		maxCopy: cmp.Or(opts.MaxCopyBytes, DefaultMaxCopyBytes),
	}
	if opts.SnapshotDir != "" {
		st, err := openSnapshotStore(opts.SnapshotDir, cmp.Or(opts.MaxSnapshots, DefaultMaxSnapshots), cmp.Or(opts.MaxSnapshotBytes, DefaultMaxSnapshotBytes))
		if err != nil {
			return nil, err
		}
		s.snaps = st
	}
	s.mux = http.NewServeMux()
	s.routes()
	s.handler = http.HandlerFunc(s.serve)
	return s, nil
}

// Handler is the one handler for both the control-plane API and the
// sandbox router: a request with an E2b-Sandbox-Id header, or whose Host
// is "<port>-<id>.<domain>", goes to the sandbox; everything else to the
// API. E2B_API_URL and E2B_SANDBOX_URL may thus be the same URL.
func (s *Server) Handler() http.Handler { return s.handler }

// Close forgets every connected sandbox. Sandboxes keep running.
func (s *Server) Close() error {
	s.closeTemplates()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	clear(s.conns)
	return nil
}

// HashAPIKey is the sha256 of an API key, as Options.APIKeyHashes holds it.
func HashAPIKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// NewAPIKey makes a random API key: "e2b_" and 40 lowercase hex digits
// (E2B's own tests require ^e2b_[0-9a-f]+$).
func NewAPIKey() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "e2b_" + hex.EncodeToString(b[:]), nil
}

// authorized checks X-API-KEY against every configured hash in constant
// time (no early exit).
func (s *Server) authorized(r *http.Request) bool {
	key := r.Header.Get("X-API-KEY")
	if key == "" {
		return false
	}
	h := HashAPIKey(key)
	ok := 0
	for i := range s.keys {
		ok |= subtle.ConstantTimeCompare(h[:], s.keys[i][:])
	}
	return ok == 1
}

// serve dispatches between the router and the control plane.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.logged(w, func(sw *statusWriter) { s.dispatch(sw, r) })
}

// DebugPortHandler serves port of the debug sandbox (Options.DebugSandboxID)
// as E2B's debug mode reaches a sandbox's ports: there getHost(port) is
// localhost:port, where envd's own machine serves it. A listener on
// 127.0.0.1:port with this handler (rayito e2b serve --debug-port) makes
// such links work: every request goes to that port of the debug
// sandbox, as through the router.
func (s *Server) DebugPortHandler(port int) (http.Handler, error) {
	if s.opts.DebugSandboxID == "" {
		return nil, errors.New("e2b: a debug port needs the debug sandbox (Options.DebugSandboxID)")
	}
	if port < 1 || port > 65535 || port == hooksPort {
		return nil, fmt.Errorf("e2b: invalid debug port %d", port)
	}
	p := strconv.Itoa(port)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.logged(w, func(sw *statusWriter) {
			sw.route = "router"
			s.route(sw, r, DebugSandboxID, p)
		})
	}), nil
}

// logged runs h with a statusWriter, recovers its panic and logs one line.
func (s *Server) logged(w http.ResponseWriter, h func(sw *statusWriter)) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok && errors.Is(e, http.ErrAbortHandler) {
				panic(v)
			}
			s.log.Error("e2b: handler panic", "route", sw.route)
			if !sw.wrote {
				writeError(sw, http.StatusInternalServerError, "internal error")
			}
		}
		level := slog.LevelInfo
		if sw.route == "router" && sw.status < 500 {
			level = slog.LevelDebug
		}
		s.log.Log(context.Background(), level, "e2b request", "route", sw.route, "status", sw.status, "sandbox", sw.sandbox, "duration", time.Since(start).Round(time.Millisecond))
	}()
	h(sw)
}

// dispatch sends r to the router or to the control plane.
func (s *Server) dispatch(sw *statusWriter, r *http.Request) {
	if id, port, ok := sandboxTarget(r); ok {
		sw.route = "router"
		sw.sandbox = id
		s.route(sw, r, id, port)
		return
	}
	if id, ok := s.signedTarget(r); ok {
		sw.route = "router"
		sw.sandbox = id
		s.route(sw, r, id, strconv.Itoa(EnvdPort))
		return
	}
	if s.serveTemplateUpload(sw, r) {
		return
	}
	_, pattern := s.mux.Handler(r)
	sw.route = pattern
	if pattern == "" {
		sw.route = "unmatched"
	}
	if pattern != "GET /health" && !s.authorized(r) {
		writeError(sw, http.StatusUnauthorized, "invalid or missing X-API-KEY")
		return
	}
	r.Body = http.MaxBytesReader(sw, r.Body, MaxBodyBytes)
	s.mux.ServeHTTP(sw, r)
}

// statusWriter records what the log line shows.
type statusWriter struct {
	http.ResponseWriter
	status  int
	wrote   bool
	route   string
	sandbox string
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func validID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// ValidDomain says whether d is a domain Options.Domain accepts: a DNS
// name of lower-case letters, digits, hyphens and dots (labels of 1 to 63
// characters, not starting or ending with a hyphen; 253 at most),
// optionally followed by :PORT (1 to 65535).
func ValidDomain(d string) bool {
	host := d
	if h, port, ok := strings.Cut(d, ":"); ok {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false
		}
		host = h
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
