package rayito

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/compat"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
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

// The environment variables that choose the platform, read where an
// option does not say (the CLI reads them through these names too).
const (
	// EnvBackend names the backend: local (the default) or aws.
	EnvBackend = "RAYITO_BACKEND"
	// EnvEndpoint is the local platform's address.
	EnvEndpoint = localplatform.EndpointEnv
	// EnvTemplate is the template (image) sandboxes are created from.
	EnvTemplate = "RAYITO_TEMPLATE"
)

// ParseBackend reads a backend's name as EnvBackend holds it: "" and
// "local" are BackendLocal, "aws" is BackendAWS; anything else is
// ErrInvalidArgument. The SDK refuses an unknown WithBackend with the same
// error, and the CLI a bad RAYITO_BACKEND.
func ParseBackend(s string) (Backend, error) {
	switch Backend(s) {
	case "", BackendLocal:
		return BackendLocal, nil
	case BackendAWS:
		return BackendAWS, nil
	}
	return "", newError(ReasonInvalidArgument, fmt.Sprintf("unknown backend %q: %s must be local or aws", s, EnvBackend))
}

// Defaults.
const (
	DefaultLocalEndpoint = localplatform.DefaultEndpoint
	// LocalTemplate is the local platform's default template (its
	// sandboxes run the host's own /usr). LocalRootTemplate is the same
	// image with root allowed (RAYITO_ALLOW_ROOT=1 in its daemon's
	// environment): commands and file operations may run as "root", and
	// the sandbox's users have sudo. Create refuses any other template on
	// the local backend.
	LocalTemplate       = localplatform.Image
	LocalRootTemplate   = localplatform.RootImage
	DefaultTimeout      = 5 * time.Minute
	DefaultReadyTimeout = 90 * time.Second
	// MaxOutputBytes caps the output a command result stores per stream.
	MaxOutputBytes = 64 << 20
	// DefaultReconnectTimeout is how long a command, terminal or watch
	// handle waits for a running sandbox that stopped answering
	// (WithReconnectTimeout).
	DefaultReconnectTimeout = 60 * time.Second
)

// Options follow one scheme. Each call takes the option interface of its
// kind: Option for the sandbox-level functions (Create, Connect, List,
// GetInfo, Kill, Pause, Resume), CommandOption for Commands, PtyOption for
// Pty, FileOption for Files, WatchOption for Files.Watch and
// SetTimeoutOption for Sandbox.SetTimeout. An option that means the same
// thing in several places has one name and satisfies each of those
// interfaces: WithUser (the account: the sandbox's default, or this
// command's, terminal's, file operation's or watch's), WithEnvs, WithCwd
// and WithTimeout (the sandbox's default and lifetime, or this command's
// or terminal's), and WithMetadata (the sandbox's labels, or a written
// file's attributes). Passing an option where it does not apply does not
// compile.

// Option configures Create, Connect, List, Kill, Pause and Resume.
// Options only one of them reads (WithAccessToken for Connect, WithStates
// for List, WithOnTimeout for Create) are ignored by the others.
type Option interface{ applySandbox(*config) }

// CommandOption configures one command (Commands.Run, Exec, Start,
// StartExec, Connect).
type CommandOption interface{ applyCommand(*commandConfig) }

// PtyOption configures one terminal (Pty.Create, Pty.Connect).
type PtyOption interface{ applyPty(*ptyConfig) }

// FileOption configures one file operation.
type FileOption interface{ applyFile(*fileConfig) }

// WatchOption configures Files.Watch.
type WatchOption interface{ applyWatch(*watchConfig) }

// ProcessOption is an option of the sandbox, of a command and of a
// terminal alike: WithEnvs, WithCwd, WithTimeout.
type ProcessOption interface {
	Option
	CommandOption
	PtyOption
}

// RunOption is WithEnvs, WithCwd or WithTimeout: it applies to the
// sandbox, its commands and terminals and to code (RunCode,
// CreateContext). sdk/git has its own WithEnvs and WithTimeout.
type RunOption interface {
	ProcessOption
	CodeOption
}

// UserOption is WithUser: it applies to everything that acts as an
// account.
type UserOption interface {
	ProcessOption
	FileOption
	WatchOption
}

// MetadataOption is WithMetadata: sandbox labels, or file attributes.
type MetadataOption interface {
	Option
	FileOption
}

type config struct {
	backend       Backend
	endpoint      string
	template      string
	timeout       time.Duration
	timeoutSet    bool // WithTimeout was given: the sandbox gets a deadline
	envs          map[string]string
	metadata      map[string]string
	user          string
	workdir       string
	internet      bool
	network       *NetworkPolicy // WithNetwork
	denyInternet  bool           // WithAllowInternetAccess(false)
	keepOnFailure bool
	readyTimeout  time.Duration
	httpClient    *http.Client
	awsConfig     *aws.Config
	logger        *slog.Logger
	compat        compat.Table
	getenv        func(string) string

	// The lifecycle block (WithOnTimeout, WithAutoResume,
	// WithMaxLifetime) and the platform's idle policy (WithIdlePolicy).
	onTimeout   TimeoutAction
	autoResume  bool
	maxLifetime time.Duration
	idle        *idlePolicy

	timings          timings
	testTimings      *timings      // withTimings
	reconnectTimeout time.Duration // WithReconnectTimeout; 0 = the default

	accessToken string // Connect: overrides the token store
	tokenDir    string // "" = the default store
	noTokens    bool   // Create stores no token, Connect reads none

	// List filters.
	states         map[string]bool
	metadataFilter map[string]string
	endReasons     bool

	extConfig // the extensions' values (sdk/secrets' options; extension.go)

	telemetryConfig // WithTelemetry (telemetry.go)
	mountsConfig    // WithMounts (mounts.go)
	tracingConfig   // WithTracerProvider (tracing.go)

	// WithExecutionRole, WithTemplateVersion, WithIngressConnectors,
	// WithEgressConnectors, WithEndpointRootCAs.
	aws awsConfig

	// persist is WithPersist's location (nil: none).
	persist *S3Prefix

	// xfer: WithTransferBucket, WithTransferThreshold (transfers.go).
	xfer transferConfig

	// events is WithEvents' configuration (nil: no lifecycle events).
	events *LifecycleEvents
	// eventsTable is WithEventsTable's, else RAYITO_EVENTS_TABLE.
	eventsTable string

	// index is WithIndex's table (nil: no metadata index; index.go).
	index *DynamoDbIndex
	// sizeMiB is WithMemory's memory size (0: the template's; size.go).
	sizeMiB int
}

func newConfig(opts []Option) *config {
	c := &config{timeout: DefaultTimeout, readyTimeout: DefaultReadyTimeout, internet: true, getenv: os.Getenv}
	for _, o := range opts {
		if o != nil {
			o.applySandbox(c)
		}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.compat == nil {
		c.compat = compat.Default()
	}
	if c.backend == "" {
		c.backend = Backend(c.getenv(EnvBackend))
		if c.backend == "" {
			c.backend = BackendLocal
		}
	}
	if c.endpoint == "" && c.backend == BackendLocal {
		// RAYITO_ENDPOINT, else the endpoint the user's own platform
		// recorded (another user's may hold the default address), else
		// DefaultLocalEndpoint.
		c.endpoint, _ = localplatform.Endpoint(c.getenv, os.Geteuid())
	}
	if c.template == "" {
		c.template = c.getenv(EnvTemplate)
	}
	if c.eventsTable == "" {
		c.eventsTable = c.getenv("RAYITO_EVENTS_TABLE")
	}
	c.timings = defaultTimings(c.backend)
	if c.testTimings != nil {
		c.timings = *c.testTimings
	}
	if c.reconnectTimeout > 0 {
		c.timings.reconnect = c.reconnectTimeout
	}
	return c
}

// sandboxOption is an Option made of a function.
type sandboxOption func(*config)

func (f sandboxOption) applySandbox(c *config) { f(c) }

// WithBackend picks the control plane; the default comes from
// RAYITO_BACKEND, else BackendLocal.
func WithBackend(b Backend) Option { return sandboxOption(func(c *config) { c.backend = b }) }

// WithEndpoint sets the control plane's URL (for the local platform, the
// address of localvm; default RAYITO_ENDPOINT, else the address the
// user's own platform recorded in its default state directory when it
// serves elsewhere than the default, else http://127.0.0.1:7450). A local
// platform serves only the user it runs as: another user's answers every
// call with ErrNotPlatformOwner.
func WithEndpoint(url string) Option { return sandboxOption(func(c *config) { c.endpoint = url }) }

// WithTemplate sets the image: on AWS an image ARN or the name of an
// image in the caller's account and region (looked up once per Create);
// locally LocalTemplate (the default) or LocalRootTemplate (root
// allowed): Create refuses any other there with ErrInvalidArgument.
func WithTemplate(t string) Option { return sandboxOption(func(c *config) { c.template = t }) }

// WithKeepOnFailure keeps a sandbox that did not become ready, for
// debugging, instead of terminating it.
func WithKeepOnFailure() Option { return sandboxOption(func(c *config) { c.keepOnFailure = true }) }

// WithReadyTimeout bounds the wait for a new sandbox to answer (default
// 90 s).
func WithReadyTimeout(d time.Duration) Option {
	return sandboxOption(func(c *config) { c.readyTimeout = d })
}

// WithHTTPClient sets the HTTP client of the control plane.
func WithHTTPClient(h *http.Client) Option {
	return sandboxOption(func(c *config) { c.httpClient = h })
}

// WithAWSConfig sets the AWS configuration (region, credentials) of the
// AWS backend; the default is loaded from the environment. It is the one
// third-party type in the SDK's API, on purpose: it is how Go programs
// already hold AWS credentials, and copying its credential chain into
// SDK-own types would only lose features. Its logger is replaced by one
// that discards (the AWS SDK's own log lines never reach the terminal).
func WithAWSConfig(cfg aws.Config) Option {
	return sandboxOption(func(c *config) { c.awsConfig = &cfg })
}

// WithLogger sets the logger of the SDK's warnings (today: a sandbox
// daemon newer than this SDK knows, once per Sandbox). The default, and a
// nil logger, discard them. The SDK never logs tokens, headers, envs,
// payloads, file contents or commands.
func WithLogger(l *slog.Logger) Option { return sandboxOption(func(c *config) { c.logger = l }) }

// WithAccessToken gives Connect the sandbox's access token, instead of
// the one in the token store.
func WithAccessToken(token string) Option {
	return sandboxOption(func(c *config) { c.accessToken = token })
}

// WithoutTokenStore keeps the token store out: Create does not store the
// new sandbox's token (read it with Sandbox.AccessToken), Connect reads
// none (pass WithAccessToken), and Kill removes none.
func WithoutTokenStore() Option { return sandboxOption(func(c *config) { c.noTokens = true }) }

// WithTokenStoreDir puts the token store in dir instead of the default
// $XDG_STATE_HOME/rayito/tokens (or ~/.local/state/rayito/tokens). Give
// it a directory of its own: Create removes from it the token files saved
// more than 9 hours ago (regular files named like a sandbox id that hold
// an access token; nothing else).
func WithTokenStoreDir(dir string) Option {
	return sandboxOption(func(c *config) { c.tokenDir = dir })
}

// WithStates makes List keep sandboxes in the given states (e.g.
// "RUNNING").
func WithStates(states ...string) Option {
	return sandboxOption(func(c *config) {
		c.states = map[string]bool{}
		for _, s := range states {
			c.states[strings.ToUpper(s)] = true
		}
	})
}

// WithMetadataFilter makes List keep running sandboxes whose metadata has
// every given key with the given value (read through each sandbox's
// Health). With WithIndex the metadata index's verified rows answer
// instead, so paused sandboxes are found too, without waking them.
func WithMetadataFilter(md map[string]string) Option {
	return sandboxOption(func(c *config) { c.metadataFilter = maps.Clone(md) })
}

// WithReconnectTimeout bounds how long a command, terminal or watch
// handle waits for a running sandbox that stopped answering before it
// gives up (default DefaultReconnectTimeout, 60 s). Time the sandbox spends
// paused does not count: a handle waits for a paused sandbox as long as it
// stays paused (see the package documentation, "Reconnecting").
func WithReconnectTimeout(d time.Duration) Option {
	return sandboxOption(func(c *config) { c.reconnectTimeout = d })
}

// withTimings replaces the SDK's waits, for tests.
func withTimings(t timings) Option { return sandboxOption(func(c *config) { c.testTimings = &t }) }

// WithEndReasons makes List read the end reason of every ended sandbox it
// returns (Info.EndReason, EndDetail, EndedAt): one control-plane call
// each, as the platform's listing does not carry them.
func WithEndReasons() Option { return sandboxOption(func(c *config) { c.endReasons = true }) }

// withCompatTable replaces proto/compat's default table, for tests.
func withCompatTable(t compat.Table) Option { return sandboxOption(func(c *config) { c.compat = t }) }

// withGetenv replaces os.Getenv, for tests.
func withGetenv(f func(string) string) Option {
	return sandboxOption(func(c *config) { c.getenv = f })
}

// userOption is WithUser.
type userOption string

func (o userOption) applySandbox(c *config)        { c.user = string(o) }
func (o userOption) applyCommand(c *commandConfig) { c.user = string(o) }
func (o userOption) applyPty(c *ptyConfig)         { c.user = string(o) }
func (o userOption) applyFile(c *fileConfig)       { c.user = string(o) }
func (o userOption) applyWatch(c *watchConfig)     { c.user = string(o) }

// WithUser sets the account: for Create the default user of commands
// (default "user"); for a command, terminal, file operation or watch the
// account it runs or acts as.
func WithUser(user string) UserOption { return userOption(user) }

// envsOption is WithEnvs.
type envsOption map[string]string

func (o envsOption) applySandbox(c *config)        { c.envs = o }
func (o envsOption) applyCommand(c *commandConfig) { c.envs = o }
func (o envsOption) applyPty(c *ptyConfig)         { c.envs = o }
func (o envsOption) applyCode(c *codeConfig)       { c.envs = o }

// WithEnvs sets environment variables. For Create they apply to every
// command of the sandbox and travel in the creation payload, which AWS may
// log: never put secrets there. For one command or terminal they apply to
// it only (the right place for a secret); for CreateContext to the
// context's kernel, for a cell of code to that cell.
func WithEnvs(envs map[string]string) RunOption { return envsOption(maps.Clone(envs)) }

// cwdOption is WithCwd.
type cwdOption string

func (o cwdOption) applySandbox(c *config) { c.workdir = string(o) }
func (o cwdOption) applyCommand(c *commandConfig) {
	dir := string(o)
	c.cwd = &dir
}
func (o cwdOption) applyPty(c *ptyConfig) { c.cwd = string(o) }
func (o cwdOption) applyCode(c *codeConfig) {
	dir := string(o)
	c.cwd = &dir
}

// WithCwd sets the working directory: for Create the default of every
// command; for one command, terminal or code context (CreateContext) its
// own (relative paths are under HOME).
func WithCwd(dir string) RunOption { return cwdOption(dir) }

// timeoutOption is WithTimeout.
type timeoutOption time.Duration

func (o timeoutOption) applySandbox(c *config) {
	c.timeout, c.timeoutSet = time.Duration(o), true
}
func (o timeoutOption) applyCommand(c *commandConfig) { c.timeout = time.Duration(o) }
func (o timeoutOption) applyPty(c *ptyConfig)         { c.timeout = time.Duration(o) }
func (o timeoutOption) applyCode(c *codeConfig)       { c.timeout = time.Duration(o) }

// WithTimeout bounds a lifetime. For Create, the sandbox's deadline (1 s
// to 8 h), d after its start: rayd ends the sandbox then (TimeoutKill,
// unless WithOnTimeout says otherwise) and its end reason is EndTimeout;
// SetTimeout moves the deadline up to its maximum lifetime (see
// WithMaxLifetime: by default d plus a minute, at least 3 minutes). The
// one exception is a d within a minute of 8 hours without WithOnTimeout or
// WithMaxLifetime: no deadline fits under the platform's 8-hour maximum,
// so the platform ends the sandbox at d (EndMaxDuration). Without
// WithTimeout a sandbox has no deadline: the platform ends it after
// DefaultTimeout (EndMaxDuration). For a command or a terminal, its own:
// it is ended (SIGTERM, SIGKILL 5 s later) after d. For a cell of code,
// its own: the kernel is interrupted after d, and restarted when it does
// not stop within 5 s.
func WithTimeout(d time.Duration) RunOption { return timeoutOption(d) }

// metadataOption is WithMetadata.
type metadataOption map[string]string

func (o metadataOption) applySandbox(c *config)  { c.metadata = o }
func (o metadataOption) applyFile(c *fileConfig) { c.metadata = o }

// WithMetadata sets labels. For Create, the sandbox's (not secret:
// Health shows them). For a write, the file's metadata (user.rayito.*
// attributes: at most 64 lowercase keys, 4000 bytes), replacing any.
func WithMetadata(md map[string]string) MetadataOption { return metadataOption(maps.Clone(md)) }

// TokenStoreDir is where the token store lives for the environment getenv
// reads (nil: the process's): $XDG_STATE_HOME/rayito/tokens, else
// $HOME/.local/state/rayito/tokens. Programs that read their environment
// through a function of their own (like the rayito CLI) pass the result to
// WithTokenStoreDir.
func TokenStoreDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return tokenstore.DefaultDir(getenv)
}
