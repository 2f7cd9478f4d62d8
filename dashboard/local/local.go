// Package local is `rayito dashboard`: a web page and a JSON API under
// /api/v1 on 127.0.0.1 that show the caller's sandboxes with the caller's
// own SDK options (the local platform or AWS) and, with AllowActions,
// kill, pause, resume and set their timeout.
//
// Every request goes through, in this order and before it is
// interpreted: a 64 KiB body cap (413); the Host and Origin allowlist of
// dashboard/hostguard (421, 403); the session (the startup URL's
// single-use token exchanged for an HttpOnly, SameSite=Strict cookie named
// after the port; without it nothing answers: 401); on /api/v1, a
// Sec-Fetch-Site other than same-origin or none (403); on a POST,
// Content-Type: application/json and the session's X-Rayito-CSRF header
// (403). Every answer carries a strict CSP, nosniff, no-store,
// X-Frame-Options: DENY, CORP same-origin and no-referrer. Requests are
// not logged; errors carry a code and a fixed message, never a platform's
// or AWS's text. docs/dashboard.md has the rest.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/rayito-dev/rayito/dashboard/hostguard"
	"github.com/rayito-dev/rayito/dashboard/internal/session"
	"github.com/rayito-dev/rayito/dashboard/internal/theme"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Errors of New: errors.Is tells a usage problem (a bad theme, logo,
// account or option: the CLI exits 2) from a listener that cannot start.
var (
	// ErrInvalidOption: an option the dashboard refuses.
	ErrInvalidOption = errors.New("dashboard: invalid option")
	// ErrInvalidTheme: the theme or logo file failed validation.
	ErrInvalidTheme = theme.ErrInvalid
)

// Defaults.
const (
	// MaxBody is the body cap of every request.
	MaxBody = 64 << 10
	// DefaultMaxIDs is how many sandboxes one action request may name.
	DefaultMaxIDs = 20
	// DefaultActionInterval paces the action worker: one platform call
	// per interval at most (5 per second).
	DefaultActionInterval = 200 * time.Millisecond
	// maxQueue is how many action requests may wait for the worker.
	maxQueue = 8
)

// Account is another AWS account read through its read role (--account
// LABEL=ROLE_ARN[,EXTERNAL_ID]): always read-only, known to the API and
// the page by its label only.
type Account struct {
	Label      string
	RoleARN    string
	ExternalID string
}

// Options configure a dashboard.
type Options struct {
	// Port is the port on 127.0.0.1; 0 picks a free one.
	Port int
	// SDK are the SDK options of every platform call (backend, endpoint,
	// credentials), as the CLI's other commands pick them.
	SDK []rayito.Option
	// Backend names the platform for the page: "local" or "aws".
	Backend string
	// LogFile, when set, is where a sandbox's log is (the local
	// platform's state directory, as `rayito sandbox logs` reads it);
	// nil: the platform keeps none the dashboard can read (AWS).
	LogFile func(id string) string
	// AllowActions enables kill, pause, resume and set timeout.
	AllowActions bool
	// CostExplorer enables the billed-cost query (AWS Cost Explorer, on
	// the caller's own account; AWS backend only).
	CostExplorer bool
	// ThemeFile and LogoFile are the user's theme (JSON) and logo (SVG),
	// validated by New.
	ThemeFile, LogoFile string
	// Accounts are other AWS accounts, read through a role each (AWS
	// backend only).
	Accounts []Account
	// AWSConfig is the configuration whose credentials assume the
	// accounts' roles (nil: loaded from the environment, as the SDK
	// does).
	AWSConfig *aws.Config
	// TokenTTL is how long the startup URL works (0: 5 minutes).
	TokenTTL time.Duration
	// MaxIDs caps the ids of one action request (0: DefaultMaxIDs).
	MaxIDs int
	// ActionInterval paces the action worker (0: DefaultActionInterval).
	ActionInterval time.Duration
	// ListTTL is how long a listing (with each running sandbox's
	// metadata and metrics) is reused by the page's refreshes and the
	// cost estimate (0: 3 s locally, 15 s on AWS, to stay well under
	// its API rates).
	ListTTL time.Duration
}

// Server is a dashboard bound to its port.
type Server struct {
	opts    Options
	ln      net.Listener
	port    int
	guard   *hostguard.Guard
	session *session.Manager
	theme   theme.Theme
	css     []byte
	logo    []byte
	be      backend
	now     func() time.Time
	queue   chan *job
	// accounts are the other accounts' read-only backends, by label.
	accounts map[string]backend
	// ce is Cost Explorer (CostExplorer on AWS only); bill its cache and
	// budget.
	ce   billedClient
	bill billedState

	// listMu serializes listings; cache holds the last one of each
	// account.
	listMu sync.Mutex
	cache  map[string]listing
}

type listing struct {
	items []Sandbox
	at    time.Time
}

// LoadTheme reads and validates a theme file and a logo file ("" : none)
// the way New does, so a caller can refuse them before anything starts.
func LoadTheme(themeFile, logoFile string) (theme.Theme, []byte, error) {
	t := theme.Default()
	if themeFile != "" {
		data, err := readCapped(themeFile, theme.MaxThemeBytes)
		if err != nil {
			return t, nil, fmt.Errorf("%w: theme file: %w", ErrInvalidTheme, err)
		}
		if t, err = theme.Parse(data); err != nil {
			return t, nil, err
		}
	}
	var logo []byte
	if logoFile != "" {
		data, err := readCapped(logoFile, theme.MaxLogoBytes)
		if err != nil {
			return t, nil, fmt.Errorf("%w: logo file: %w", ErrInvalidTheme, err)
		}
		if err := theme.ValidateLogo(data); err != nil {
			return t, nil, err
		}
		logo = data
	}
	return t, logo, nil
}

// readCapped reads a file of at most max bytes (one more is an error).
func readCapped(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New("cannot open it")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, errors.New("cannot read it")
	}
	if len(data) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// New validates opts (theme, logo, accounts) and listens on
// 127.0.0.1:Port. Serve then answers until its context ends.
func New(opts Options) (*Server, error) {
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrInvalidOption, opts.Port)
	}
	if opts.MaxIDs < 0 || opts.ActionInterval < 0 || opts.TokenTTL < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrInvalidOption)
	}
	t, logo, err := LoadTheme(opts.ThemeFile, opts.LogoFile)
	if err != nil {
		return nil, err
	}
	if err := checkAccounts(opts.Backend, opts.Accounts); err != nil {
		return nil, err
	}
	if opts.CostExplorer && opts.Backend != "aws" {
		return nil, fmt.Errorf("%w: --cost-explorer reads your AWS bill: it needs RAYITO_BACKEND=aws", ErrInvalidOption)
	}
	accounts := map[string]backend{}
	var billing billedClient
	if len(opts.Accounts) > 0 || opts.CostExplorer {
		base := opts.AWSConfig
		if base == nil {
			// Reads the environment and profile only: no AWS call.
			cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithLogger(logging.Nop{}))
			if err != nil {
				return nil, fmt.Errorf("%w: cannot load the AWS configuration for --account or --cost-explorer", ErrInvalidOption)
			}
			base = &cfg
		}
		for _, a := range opts.Accounts {
			accounts[a.Label] = accountBackend(*base, opts.SDK, a)
		}
		if opts.CostExplorer {
			billing = newBilledClient(*base)
		}
	}
	if opts.MaxIDs == 0 {
		opts.MaxIDs = DefaultMaxIDs
	}
	if opts.ActionInterval == 0 {
		opts.ActionInterval = DefaultActionInterval
	}
	if opts.Backend == "" {
		opts.Backend = "local"
	}
	if opts.ListTTL <= 0 {
		opts.ListTTL = 3 * time.Second
		if opts.Backend == "aws" {
			opts.ListTTL = 15 * time.Second
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on 127.0.0.1:%d: %w", opts.Port, err)
	}
	s, err := newServer(opts, ln, t, logo, &sdkBackend{opts: opts.SDK, logFile: opts.LogFile, now: time.Now})
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.accounts = accounts
	s.ce = billing
	return s, nil
}

func newServer(opts Options, ln net.Listener, t theme.Theme, logo []byte, be backend) (*Server, error) {
	port := ln.Addr().(*net.TCPAddr).Port
	g, err := hostguard.New(port, hostguard.Options{})
	if err != nil {
		return nil, err
	}
	return &Server{
		opts: opts, ln: ln, port: port, guard: g,
		session: session.New(port, opts.TokenTTL, nil),
		theme:   t, css: t.CSS(), logo: logo, be: be, now: time.Now,
		queue: make(chan *job, maxQueue),
		bill:  billedState{budget: BilledBudget},
	}, nil
}

// Port is the port the dashboard listens on.
func (s *Server) Port() int { return s.port }

// URL is the one-time startup URL: http://127.0.0.1:<port>/?token=...
func (s *Server) URL() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.port) + "/?token=" + s.session.StartupToken()
}

// CookieName is the session cookie's name (rayito_dashboard_<port>).
func (s *Server) CookieName() string { return s.session.CookieName() }

// Serve answers until ctx ends, then closes the listener and waits for
// the action worker.
func (s *Server) Serve(ctx context.Context) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
		// Requests are not logged: no error log of the server either
		// (it could name a client's address or a malformed request).
		ErrorLog: discardLogger(),
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.worker(wctx) }()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(s.ln) }()
	select {
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = hs.Shutdown(sctx)
		scancel()
		cancel()
		<-done
		return nil
	case err := <-errc:
		cancel()
		<-done
		return err
	}
}

// sandboxes is an account's listing, reused for ListTTL; one listing at
// a time.
func (s *Server) sandboxes(ctx context.Context, label string, be backend) ([]Sandbox, error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if l, ok := s.cache[label]; ok && s.now().Sub(l.at) < s.opts.ListTTL {
		return l.items, nil
	}
	list, err := be.list(ctx)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []Sandbox{}
	}
	if s.cache == nil {
		s.cache = map[string]listing{}
	}
	s.cache[label] = listing{items: list, at: s.now()}
	return list, nil
}

// forget drops the cached listings (after an action).
func (s *Server) forget() {
	s.listMu.Lock()
	clear(s.cache)
	s.listMu.Unlock()
}
