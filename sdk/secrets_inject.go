package rayito

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// secretConfig is the sandbox's secrets: where they are read
// (WithSecretStore, WithSecretCache; by default a cache over the
// backend's store, made on first use) and the ones every command,
// terminal and cell gets (WithSecrets).
type secretConfig struct {
	secretMu    *sync.Mutex // guards the lazy creation of secretCache
	secretStore SecretStore
	secretCache *SecretCache
	secrets     map[string]SecretRef // env name -> secret
}

// callSecrets is the WithSecrets of one command, terminal or cell.
type callSecrets struct {
	secrets map[string]SecretRef
}

// WithSecretStore sets the store the sandbox's secrets (WithSecrets) are
// read from, through a cache of the default TTL. The default is the local
// store (DefaultLocalSecretDir) for BackendLocal and AWS Secrets Manager
// (NewAWSSecretStore over the sandbox's AWS configuration) for
// BackendAWS, made on first use.
func WithSecretStore(s SecretStore) Option {
	return sandboxOption(func(c *config) { c.secretStore = s })
}

// WithSecretCache sets the cache the sandbox's secrets are read through;
// share one between sandboxes to read each secret once per TTL. It wins
// over WithSecretStore.
func WithSecretCache(sc *SecretCache) Option {
	return sandboxOption(func(c *config) { c.secretCache = sc })
}

// SecretsOption is WithSecrets: it applies to the sandbox, its commands,
// terminals and code.
type SecretsOption interface {
	Option
	CommandOption
	PtyOption
	CodeOption
}

// secretsOption is WithSecrets. Printing it shows env and secret names,
// never a value (it holds none).
type secretsOption map[string]SecretRef

func (o secretsOption) applySandbox(c *config)        { c.secrets = addSecrets(c.secrets, o) }
func (o secretsOption) applyCommand(c *commandConfig) { c.secrets = addSecrets(c.secrets, o) }
func (o secretsOption) applyPty(c *ptyConfig)         { c.secrets = addSecrets(c.secrets, o) }
func (o secretsOption) applyCode(c *codeConfig)       { c.secrets = addSecrets(c.secrets, o) }

func addSecrets(into, more map[string]SecretRef) map[string]SecretRef {
	if into == nil {
		into = make(map[string]SecretRef, len(more))
	}
	maps.Copy(into, more)
	return into
}

// WithSecrets sets environment variables from secrets: env name ->
// secret. The values are read through the sandbox's SecretCache when
// each command, terminal or cell starts, and travel only in that call's
// request, never in the sandbox's creation payload, its metadata, logs or
// errors. For Create and Connect the map applies to every command,
// terminal and cell of the Sandbox; for one call it adds to that map
// (overriding the same env names). Several WithSecrets add up.
//
// Refused with ErrInvalidArgument, when the call is made: an env name
// that is not [A-Za-z_][A-Za-z0-9_]*, a reserved one (PATH, HOME,
// PYTHONPATH, NODE_OPTIONS, AWS_*, LD_*, RAYITO_*), one WithEnvs also
// sets for the call or the sandbox, an invalid secret name, and secrets
// under "webhooks/" (the platform's own).
func WithSecrets(secrets map[string]SecretRef) SecretsOption {
	return secretsOption(maps.Clone(secrets))
}

// validEnvName reports [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// reservedEnv reports env names a secret may not set.
func reservedEnv(k string) bool {
	switch k {
	case "PATH", "HOME", "PYTHONPATH", "NODE_OPTIONS":
		return true
	}
	return strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "RAYITO_")
}

// webhookSecretPrefix is the platform's own secrets, never injected.
const webhookSecretPrefix = "webhooks/"

// planSecretEnvs checks the sandbox's and the call's secrets against the
// envs set for the sandbox and the call, and returns the env name ->
// secret map of the call (nil for none). Errors name the env var, never
// the secret.
func planSecretEnvs(sandboxEnvs, callEnvs map[string]string, sandboxSecrets, callSecrets map[string]SecretRef) (map[string]SecretRef, error) {
	if len(sandboxSecrets) == 0 && len(callSecrets) == 0 {
		return nil, nil
	}
	plan := make(map[string]SecretRef, len(sandboxSecrets)+len(callSecrets))
	maps.Copy(plan, sandboxSecrets)
	maps.Copy(plan, callSecrets)
	for env, ref := range plan {
		switch {
		case !validEnvName(env):
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret env name %q is not a valid variable name", env))
		case reservedEnv(env):
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: the name is reserved", env))
		}
		if _, ok := callEnvs[env]; ok {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: env %s is set by both WithEnvs and WithSecrets", env))
		}
		if _, ok := sandboxEnvs[env]; ok {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: env %s is set by both the sandbox's WithEnvs and WithSecrets", env))
		}
		if err := validateSecretRef(ref); err != nil {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: invalid secret reference", env), err)
		}
		if strings.HasPrefix(ref.Name, webhookSecretPrefix) {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: webhook secrets cannot be injected", env))
		}
	}
	return plan, nil
}

// secretEnvs returns the envs of one call: callEnvs with the values of
// the sandbox's and the call's secrets added. Without secrets it is
// callEnvs itself; otherwise a new map (callEnvs is not changed).
func (s *Sandbox) secretEnvs(ctx context.Context, callEnvs map[string]string, callSecrets map[string]SecretRef) (map[string]string, error) {
	plan, err := planSecretEnvs(s.cfg.envs, callEnvs, s.cfg.secrets, callSecrets)
	if err != nil || plan == nil {
		return callEnvs, err
	}
	out := make(map[string]string, len(callEnvs)+len(plan))
	maps.Copy(out, callEnvs)
	for env, ref := range plan {
		v, err := s.secretValue(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("rayito: secret env %s: %w", env, err)
		}
		if strings.IndexByte(string(v), 0) >= 0 {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: the value has a NUL byte", env))
		}
		out[env] = string(v)
	}
	return out, nil
}

// secretValue reads ref through the sandbox's cache (for the gateway,
// too: webhook secrets are allowed here).
func (s *Sandbox) secretValue(ctx context.Context, ref SecretRef) ([]byte, error) {
	c, err := s.cfg.secretCacheOf(ctx)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, ref)
}

// checkSecrets checks the sandbox's WithSecrets against its WithEnvs
// without reading any secret (Create and Connect may call it to fail
// early).
func (c *config) checkSecrets() error {
	_, err := planSecretEnvs(c.envs, nil, c.secrets, nil)
	return err
}

// secretCacheOf returns the sandbox's cache, making the default one on
// first use.
func (c *config) secretCacheOf(ctx context.Context) (*SecretCache, error) {
	c.secretMu.Lock()
	defer c.secretMu.Unlock()
	if c.secretCache != nil {
		return c.secretCache, nil
	}
	store := c.secretStore
	if store == nil {
		var err error
		if store, err = c.defaultSecretStore(ctx); err != nil {
			return nil, err
		}
	}
	sc, err := NewSecretCache(store)
	if err != nil {
		return nil, err
	}
	c.secretCache = sc
	return sc, nil
}

// defaultSecretStore is the backend's store.
func (c *config) defaultSecretStore(ctx context.Context) (SecretStore, error) {
	switch c.backend {
	case BackendAWS:
		if c.awsConfig != nil {
			return NewAWSSecretStore(*c.awsConfig), nil
		}
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
		if err != nil {
			return nil, newError(ReasonUnauthenticated, "cannot load the AWS configuration (credentials, profile)", err)
		}
		return NewAWSSecretStore(awsCfg), nil
	default:
		getenv := c.getenv
		dir, err := DefaultLocalSecretDir(getenv)
		if err != nil {
			return nil, err
		}
		return NewLocalSecretStore(dir)
	}
}
