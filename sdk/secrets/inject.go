package secrets

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// stateKey is the key of the package's extension value (hook.NewOption).
type stateKey struct{}

// state is the secrets of a sandbox (or, call set, of one command,
// terminal or cell): where they are read (WithStore, WithCache; by
// default a cache over the backend's store, made on first use), the ones
// every command gets (WithSecrets), the gateway routes, placeholders and
// header rules Create configures, and what was sent (Refresh sends it
// again).
type state struct {
	mu    sync.Mutex // guards cache's lazy creation and the sent* fields
	store Store
	cache *Cache
	envs  map[string]Ref // env name -> secret

	gateways     []Gateway
	placeholders []Placeholder
	headerRules  []HeaderRule

	sentGateways     []Gateway
	sentPlaceholders []Placeholder
	sentHeaderRules  []HeaderRule
}

func newState() any { return &state{} }

// sandboxOption is an option that changes the sandbox's state.
func sandboxOption(f func(*state)) rayito.Option {
	return hook.NewOption(stateKey{}, func(old any) any {
		st, _ := old.(*state)
		if st == nil {
			st = &state{}
		}
		f(st)
		return st
	}).(rayito.Option)
}

// WithStore sets the store the sandbox's secrets (WithSecrets, the
// gateways') are read from, through a cache of the default TTL. The
// default is the local store (DefaultLocalDir) for BackendLocal and AWS
// Secrets Manager (NewAWSStore over the sandbox's AWS configuration) for
// BackendAWS, made on first use.
func WithStore(s Store) rayito.Option {
	return sandboxOption(func(st *state) { st.store = s })
}

// WithCache sets the cache the sandbox's secrets are read through; share
// one between sandboxes to read each secret once per TTL. It wins over
// WithStore.
func WithCache(sc *Cache) rayito.Option {
	return sandboxOption(func(st *state) { st.cache = sc })
}

// CallOption is WithSecrets: it applies to the sandbox, its commands,
// terminals and code.
type CallOption interface {
	rayito.Option
	rayito.CommandOption
	rayito.PtyOption
	rayito.CodeOption
}

func addSecrets(into, more map[string]Ref) map[string]Ref {
	if into == nil {
		into = make(map[string]Ref, len(more))
	}
	maps.Copy(into, more)
	return into
}

// WithSecrets sets environment variables from secrets: env name ->
// secret. The values are read through the sandbox's Cache when each
// command, terminal or cell starts, and travel only in that call's
// request, never in the sandbox's creation payload, its metadata, logs or
// errors. For Create and Connect the map applies to every command,
// terminal and cell of the Sandbox; for one call it adds to that map
// (overriding the same env names). Several WithSecrets add up.
//
// Refused with rayito.ErrInvalidArgument, when the call is made: an env name
// that is not [A-Za-z_][A-Za-z0-9_]*, a reserved one (PATH, HOME,
// PYTHONPATH, NODE_OPTIONS, AWS_*, LD_*, RAYITO_*), one WithEnvs also
// sets for the call or the sandbox, an invalid secret name, and secrets
// under "webhooks/" (the platform's own). Printing the option shows no
// value (it holds none).
func WithSecrets(secrets map[string]Ref) CallOption {
	secrets = maps.Clone(secrets)
	return hook.NewOption(stateKey{}, func(old any) any {
		st, _ := old.(*state)
		if st == nil {
			// A sandbox's first value, or a call's (which holds only
			// envs: the root hands it to the sandbox's value).
			st = &state{}
		}
		st.envs = addSecrets(st.envs, secrets)
		return st
	}).(CallOption)
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
func planSecretEnvs(sandboxEnvs, callEnvs map[string]string, sandboxSecrets, callSecrets map[string]Ref) (map[string]Ref, error) {
	if len(sandboxSecrets) == 0 && len(callSecrets) == 0 {
		return nil, nil
	}
	plan := make(map[string]Ref, len(sandboxSecrets)+len(callSecrets))
	maps.Copy(plan, sandboxSecrets)
	maps.Copy(plan, callSecrets)
	for env, ref := range plan {
		switch {
		case !validEnvName(env):
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret env name %q is not a valid variable name", env))
		case reservedEnv(env):
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: the name is reserved", env))
		}
		if _, ok := callEnvs[env]; ok {
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: env %s is set by both WithEnvs and WithSecrets", env))
		}
		if _, ok := sandboxEnvs[env]; ok {
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: env %s is set by both the sandbox's WithEnvs and WithSecrets", env))
		}
		if err := validateSecretRef(ref); err != nil {
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: invalid secret reference", env), err)
		}
		if strings.HasPrefix(ref.Name, webhookSecretPrefix) {
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: webhook secrets cannot be injected", env))
		}
	}
	return plan, nil
}

// CheckSandbox checks the sandbox's WithSecrets against its WithEnvs
// without reading any secret (hook.Checker: Create, NewPool, Take and
// Connect fail early).
func (st *state) CheckSandbox(sandboxEnvs map[string]string) error {
	_, err := planSecretEnvs(sandboxEnvs, nil, st.envs, nil)
	return err
}

// CallEnvs adds the values of the sandbox's and the call's secrets to
// callEnvs (hook.CallEnver). Without secrets it is callEnvs itself;
// otherwise a new map (callEnvs is not changed).
func (st *state) CallEnvs(ctx context.Context, sb any, call any, sandboxEnvs, callEnvs map[string]string) (map[string]string, error) {
	sbx := sb.(*rayito.Sandbox)
	// The sandbox's value: the secrets every call gets and the cache.
	own := hook.Value(sbx, stateKey{}, newState).(*state)
	var callSecrets map[string]Ref
	if c, ok := call.(*state); ok {
		callSecrets = c.envs
	}
	plan, err := planSecretEnvs(sandboxEnvs, callEnvs, own.envs, callSecrets)
	if err != nil || plan == nil {
		return callEnvs, err
	}
	cache, err := own.cacheOf(ctx, sbx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(callEnvs)+len(plan))
	maps.Copy(out, callEnvs)
	for env, ref := range plan {
		v, err := cache.Get(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("rayito: secret env %s: %w", env, err)
		}
		if strings.IndexByte(string(v), 0) >= 0 {
			return nil, rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret env %s: the value has a NUL byte", env))
		}
		out[env] = string(v)
	}
	return out, nil
}

// ConfigureSandbox adds the gateway and placeholders sections Create's
// Configure carries (hook.Configurer).
func (st *state) ConfigureSandbox(ctx context.Context, sb any, req *raydv1.ConfigureRequest) (bool, error) {
	if st.gateways == nil && st.placeholders == nil && st.headerRules == nil {
		return false, nil
	}
	return true, st.sections(ctx, sb.(*rayito.Sandbox), req, st.gateways, st.placeholders, st.headerRules, false)
}

// SandboxConfigured records what Create sent (hook.Configurer).
func (st *state) SandboxConfigured(_ any, results []*raydv1.SectionResult) error {
	return st.record(results, st.gateways, st.placeholders, st.headerRules)
}

// NeedsEgress reports gateway routes or placeholders, whose upstreams rayd
// calls (hook.Egresser).
func (st *state) NeedsEgress() bool { return len(st.gateways) > 0 || len(st.placeholders) > 0 }

// cacheOf returns the sandbox's cache, making the default one on first
// use.
func (st *state) cacheOf(ctx context.Context, sb *rayito.Sandbox) (*Cache, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cache != nil {
		return st.cache, nil
	}
	store := st.store
	if store == nil {
		var err error
		if store, err = defaultStore(ctx, hook.EnvOf(sb)); err != nil {
			return nil, err
		}
	}
	sc, err := NewCache(store)
	if err != nil {
		return nil, err
	}
	st.cache = sc
	return sc, nil
}

// defaultStore is the backend's store.
func defaultStore(ctx context.Context, env hook.Env) (Store, error) {
	if env.Backend == string(rayito.BackendAWS) {
		awsCfg, err := env.AWSConfig(ctx)
		if err != nil {
			return nil, err
		}
		return NewAWSStore(awsCfg), nil
	}
	dir, err := DefaultLocalDir(env.Getenv)
	if err != nil {
		return nil, err
	}
	return NewLocalStore(dir)
}
