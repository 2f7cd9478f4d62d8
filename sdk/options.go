package rayito

import (
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/compat"
)

// Backend selects the control plane.
type Backend string

// The backends.
const (
	// BackendLocal is the local platform (localvm) on this machine.
	BackendLocal Backend = "local"
	// BackendAWS is AWS Lambda MicroVMs.
	BackendAWS Backend = "aws"
)

// Defaults.
const (
	DefaultLocalEndpoint = "http://127.0.0.1:7450"
	DefaultTimeout       = 5 * time.Minute
	DefaultReadyTimeout  = 90 * time.Second
	// MaxOutputBytes caps the output a command result stores per stream.
	MaxOutputBytes = 64 << 20
)

// Option configures Create, Connect, List and Kill.
type Option func(*config)

type config struct {
	backend       Backend
	endpoint      string
	template      string
	timeout       time.Duration
	envs          map[string]string
	metadata      map[string]string
	user          string
	workdir       string
	internet      bool
	keepOnFailure bool
	readyTimeout  time.Duration
	httpClient    *http.Client
	awsConfig     *aws.Config
	logger        *slog.Logger
	compat        compat.Table
	getenv        func(string) string
}

func newConfig(opts []Option) *config {
	c := &config{timeout: DefaultTimeout, readyTimeout: DefaultReadyTimeout, internet: true, getenv: os.Getenv}
	for _, o := range opts {
		o(c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.compat == nil {
		c.compat = compat.Default()
	}
	if c.backend == "" {
		c.backend = Backend(c.getenv("RAYITO_BACKEND"))
		if c.backend == "" {
			c.backend = BackendLocal
		}
	}
	if c.endpoint == "" && c.backend == BackendLocal {
		c.endpoint = c.getenv("RAYITO_ENDPOINT")
		if c.endpoint == "" {
			c.endpoint = DefaultLocalEndpoint
		}
	}
	if c.template == "" {
		c.template = c.getenv("RAYITO_TEMPLATE")
	}
	return c
}

// WithBackend picks the control plane; the default comes from
// RAYITO_BACKEND, else BackendLocal.
func WithBackend(b Backend) Option { return func(c *config) { c.backend = b } }

// WithEndpoint sets the control plane's URL (for the local platform, the
// address of localvm; default RAYITO_ENDPOINT or http://127.0.0.1:7450).
func WithEndpoint(url string) Option { return func(c *config) { c.endpoint = url } }

// WithTemplate sets the image (an image ARN on AWS; any name locally).
func WithTemplate(t string) Option { return func(c *config) { c.template = t } }

// WithTimeout sets the sandbox's maximum lifetime (1 s to 8 h; default 5
// minutes). The platform terminates it then.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithEnvs sets environment variables for every command of the sandbox.
// They travel in the creation payload, which AWS may log: never put
// secrets here; pass them to a single command instead.
func WithEnvs(envs map[string]string) Option { return func(c *config) { c.envs = envs } }

// WithMetadata labels the sandbox. Metadata is not secret: Health shows it.
func WithMetadata(md map[string]string) Option { return func(c *config) { c.metadata = md } }

// WithUser sets the default user of commands (default "user").
func WithUser(u string) Option { return func(c *config) { c.user = u } }

// WithWorkdir sets the default working directory of commands.
func WithWorkdir(dir string) Option { return func(c *config) { c.workdir = dir } }

// WithInternetAccess allows or forbids outbound internet access (default
// allowed).
func WithInternetAccess(allow bool) Option { return func(c *config) { c.internet = allow } }

// WithKeepOnFailure keeps a sandbox that did not become ready, for
// debugging, instead of terminating it.
func WithKeepOnFailure() Option { return func(c *config) { c.keepOnFailure = true } }

// WithReadyTimeout bounds the wait for a new sandbox to answer (default
// 90 s).
func WithReadyTimeout(d time.Duration) Option { return func(c *config) { c.readyTimeout = d } }

// WithHTTPClient sets the HTTP client of the control plane.
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// WithAWSConfig sets the AWS configuration (region, credentials) of the
// AWS backend; the default is loaded from the environment.
func WithAWSConfig(cfg aws.Config) Option { return func(c *config) { c.awsConfig = &cfg } }

// WithLogger sets the logger of the SDK's warnings (today: a sandbox
// daemon newer than this SDK knows, once per Sandbox). The default, and a
// nil logger, discard them. The SDK never logs tokens, headers, envs,
// payloads, file contents or commands.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// withCompatTable replaces proto/compat's default table, for tests.
func withCompatTable(t compat.Table) Option { return func(c *config) { c.compat = t } }

// withGetenv replaces os.Getenv, for tests.
func withGetenv(f func(string) string) Option { return func(c *config) { c.getenv = f } }
