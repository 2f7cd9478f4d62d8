package rayito

// This file is the SDK's extension point: the few exported hooks through
// which the packages built on the root package (sdk/secrets, sdk/git)
// take part in a sandbox's life without the root importing them. Programs
// use those packages' own API; they need none of this. The hooks that
// are not NewError live in sdk/internal/hook, which this file fills.

import (
	"context"
	"maps"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// NewError is an error of reason (matching its sentinel, e.g.
// ErrInvalidArgument, with errors.Is) with the message msg and causes
// reachable through errors.Is and errors.As. It is how the SDK's own
// packages build their errors; msg must hold no secret.
func NewError(reason Reason, msg string, causes ...error) error {
	return newError(reason, msg, causes...)
}

// extConfig is the extension values of a sandbox's configuration
// (hook.NewOption): key -> value.
type extConfig struct {
	exts map[any]any
}

// callExts is the extension values of one command, terminal or cell.
type callExts struct {
	exts map[any]any
}

// extOption is hook.NewOption's option.
type extOption struct {
	key    any
	update func(old any) any
}

func setExt(m *map[any]any, key any, update func(old any) any) {
	if *m == nil {
		*m = map[any]any{}
	}
	if v := update((*m)[key]); v != nil {
		(*m)[key] = v
	} else {
		delete(*m, key)
	}
}

func (o extOption) applySandbox(c *config)        { setExt(&c.exts, o.key, o.update) }
func (o extOption) applyCommand(c *commandConfig) { setExt(&c.exts, o.key, o.update) }
func (o extOption) applyPty(c *ptyConfig)         { setExt(&c.exts, o.key, o.update) }
func (o extOption) applyCode(c *codeConfig)       { setExt(&c.exts, o.key, o.update) }

// checkExtensions runs the extension values' checks (hook.Checker).
func (c *config) checkExtensions() error {
	for _, v := range c.exts {
		if ch, ok := v.(hook.Checker); ok {
			if err := ch.CheckSandbox(c.envs); err != nil {
				return err
			}
		}
	}
	return nil
}

// extensionEnvs is the envs of one call: callEnvs with what the
// sandbox's and the call's extension values add (hook.CallEnver).
func (s *Sandbox) extensionEnvs(ctx context.Context, callEnvs map[string]string, call map[any]any) (map[string]string, error) {
	s.extMu.Lock()
	keys := make(map[any]any, len(s.cfg.exts)+len(call))
	maps.Copy(keys, s.cfg.exts)
	s.extMu.Unlock()
	for k, v := range call {
		if _, ok := keys[k]; !ok {
			keys[k] = v
		}
	}
	envs := callEnvs
	for k, v := range keys {
		e, ok := v.(hook.CallEnver)
		if !ok {
			continue
		}
		var err error
		if envs, err = e.CallEnvs(ctx, s, call[k], s.cfg.envs, envs); err != nil {
			return nil, err
		}
	}
	return envs, nil
}

// configureExtensions adds the extension values' sections to req
// (hook.Configurer) and returns the values that added some.
func (s *Sandbox) configureExtensions(ctx context.Context, req *raydv1.ConfigureRequest) ([]hook.Configurer, error) {
	var added []hook.Configurer
	for _, v := range s.cfg.exts {
		c, ok := v.(hook.Configurer)
		if !ok {
			continue
		}
		did, err := c.ConfigureSandbox(ctx, s, req)
		if err != nil {
			return nil, err
		}
		if did {
			added = append(added, c)
		}
	}
	return added, nil
}

// extensionsConfigured hands results to the values that added sections.
func (s *Sandbox) extensionsConfigured(added []hook.Configurer, results []*raydv1.SectionResult) error {
	for _, c := range added {
		if err := c.SandboxConfigured(s, results); err != nil {
			return err
		}
	}
	return nil
}

// configureOnly is a Configure call of the extension values' sections
// alone (a pool's Take); none: no call.
func (s *Sandbox) configureOnly(ctx context.Context) error {
	req := &raydv1.ConfigureRequest{RequestId: newRequestID()}
	added, err := s.configureExtensions(ctx, req)
	if err != nil || added == nil {
		return err
	}
	results, err := s.configure(ctx, req)
	if err != nil {
		return err
	}
	return s.extensionsConfigured(added, results)
}

// configure makes one Configure call and records the gateway routes and
// placeholders its results report.
func (s *Sandbox) configure(ctx context.Context, req *raydv1.ConfigureRequest) ([]*raydv1.SectionResult, error) {
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}
	resp, err := s.dp.config.Configure(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr("configure", err)
	}
	results := resp.Msg.GetResults()
	s.gateways.recordAll(results)
	return results, nil
}

// awsConfigOf is WithAWSConfig's configuration, else the default chain's.
func (c *config) awsConfigOf(ctx context.Context) (aws.Config, error) {
	if c.awsConfig != nil {
		return *c.awsConfig, nil
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		return aws.Config{}, newError(ReasonUnauthenticated, "cannot load the AWS configuration (credentials, profile)", err)
	}
	return awsCfg, nil
}

func init() {
	hook.NewOption = func(key any, update func(old any) any) any { return extOption{key: key, update: update} }
	hook.Value = func(sb any, key any, init func() any) any {
		s := sb.(*Sandbox)
		s.extMu.Lock()
		defer s.extMu.Unlock()
		v := s.cfg.exts[key]
		if v == nil && init != nil {
			v = init()
			setExt(&s.cfg.exts, key, func(any) any { return v })
		}
		return v
	}
	hook.EnvOf = func(sb any) hook.Env {
		c := sb.(*Sandbox).cfg
		return hook.Env{Backend: string(c.backend), Getenv: c.getenv, AWSConfig: c.awsConfigOf, Logger: c.logger}
	}
	hook.Configure = func(ctx context.Context, sb any, req *raydv1.ConfigureRequest) ([]*raydv1.SectionResult, error) {
		return sb.(*Sandbox).configure(ctx, req)
	}
	hook.ConfigClient = func(sb any) raydv1connect.ConfigureServiceClient { return sb.(*Sandbox).dp.config }
	hook.RPCError = rpcErr
	hook.SectionError = sectionErr
	hook.AWSError = awsErr
	hook.AWSErrorCode = awsErrorCode
	hook.Detached = func(opts ...any) any {
		os := make([]Option, 0, len(opts))
		for _, o := range opts {
			os = append(os, o.(Option))
		}
		return &Sandbox{cfg: newConfig(os)}
	}
	hook.CallEnvs = func(ctx context.Context, sb any, opts ...any) (map[string]string, error) {
		os := make([]CommandOption, 0, len(opts))
		for _, o := range opts {
			os = append(os, o.(CommandOption))
		}
		cc := commandOpts(os)
		return sb.(*Sandbox).extensionEnvs(ctx, cc.envs, cc.exts)
	}
	hook.Placeholders = func(sb any) map[string]string { return sb.(*Sandbox).Placeholders() }
}
