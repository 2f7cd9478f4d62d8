// Package hook is the SDK's extension point: how the packages built on the
// root package (sdk/secrets) take part in a sandbox's life without the
// root importing them and without growing its public API.
//
// The root package fills the functions below in its init; a sandbox is
// passed as any (it is a *rayito.Sandbox), so this package never imports
// the root. Extension values, held per key in a sandbox's or a call's
// configuration (NewOption), implement any of Checker, Configurer and
// CallEnver; the root calls them at the matching points.
package hook

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

// Env is what an extension may read of a sandbox's configuration.
type Env struct {
	// Backend is "local" or "aws".
	Backend string
	// Getenv is the configuration's environment (os.Getenv by default).
	Getenv func(string) string
	// AWSConfig is the SDK's AWS configuration (WithAWSConfig), else the
	// default chain's; it is loaded only when called.
	AWSConfig func(ctx context.Context) (aws.Config, error)
	// Logger never receives values.
	Logger *slog.Logger
}

// Checker is an extension value that checks itself against the
// sandbox's WithEnvs before anything is created (Create, NewPool, Take,
// Connect). It reads nothing remote.
type Checker interface {
	CheckSandbox(sandboxEnvs map[string]string) error
}

// Configurer is an extension value that takes part in the one Configure
// call Create (or a pool's Take) makes.
type Configurer interface {
	// ConfigureSandbox adds its sections to req and reports whether it
	// added any.
	ConfigureSandbox(ctx context.Context, sb any, req *raydv1.ConfigureRequest) (bool, error)
	// SandboxConfigured reads the call's results (every section's, its
	// own among them); an error fails the call.
	SandboxConfigured(sb any, results []*raydv1.SectionResult) error
}

// CallEnver is an extension value that adds environment variables to
// each command, terminal or cell. The root calls the sandbox's value,
// else the call's, with the call's value of the same key (nil for none).
type CallEnver interface {
	// CallEnvs returns the call's envs: callEnvs with its own added
	// (callEnvs itself when it adds none; callEnvs is never changed).
	CallEnvs(ctx context.Context, sb any, call any, sandboxEnvs, callEnvs map[string]string) (map[string]string, error)
}

// Egresser is an extension value whose sandbox needs rayd to call
// upstreams (gateway routes, placeholders): a network policy that denies
// the Internet keeps that route out.
type Egresser interface {
	NeedsEgress() bool
}

// The root package's side, set in its init.
var (
	// NewOption is an option (a rayito.Option, CommandOption, PtyOption
	// and CodeOption) that sets key's value in the configuration it is
	// applied to: update gets the value so far (nil for none).
	NewOption func(key any, update func(old any) any) any
	// Value is the sandbox's value of key; init, when not nil, makes one
	// when it has none (kept for the sandbox's life).
	Value func(sb any, key any, init func() any) any
	// EnvOf is the sandbox's Env.
	EnvOf func(sb any) Env
	// Configure makes one Configure call on the sandbox; the gateway
	// routes and placeholders its results report are recorded (Gateway,
	// Placeholder).
	Configure func(ctx context.Context, sb any, req *raydv1.ConfigureRequest) ([]*raydv1.SectionResult, error)
	// ConfigClient is the sandbox's Configure service (SecretAudit).
	ConfigClient func(sb any) raydv1connect.ConfigureServiceClient
	// RPCError is the SDK's error of a failed data-plane call op.
	RPCError func(op string, err error) error
	// SectionError is the error of a section that was not applied (nil
	// for an applied one); its message names the field, never a value.
	SectionError func(r *raydv1.SectionResult) error
	// AWSError is the SDK's one mapping of an AWS service's error: the
	// message holds the service, op and exception name only.
	AWSError func(service, op string, err error) error
	// AWSErrorCode is an AWS API error's exception name ("" for others).
	AWSErrorCode func(err error) string
	// Detached is a sandbox of opts (rayito.Options) that reaches no
	// platform: for the extensions' tests.
	Detached func(opts ...any) any
	// CallEnvs is the envs a command started with opts (rayito.CommandOptions)
	// would get on the sandbox: for the extensions' tests.
	CallEnvs func(ctx context.Context, sb any, opts ...any) (map[string]string, error)
	// Placeholders is the sandbox's placeholders in force: env name ->
	// placeholder (a copy).
	Placeholders func(sb any) map[string]string
)
