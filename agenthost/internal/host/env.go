package host

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/agenthost"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// TokenVariable carries the service token to the host on MicroVMs. The
// host removes it from the agent's environment.
const TokenVariable = agenthost.ServiceTokenVariable

// SecretSource reads a secret's string by name or ARN (on AgentCore,
// Secrets Manager with the runtime role). Errors should be *secretenv.Error
// with a closed code; others are reported as secret_env_fetch_failed.
type SecretSource interface {
	SecretString(ctx context.Context, id string) (string, error)
}

// agentEnv is what start-up made of the host's environment.
type agentEnv struct {
	// env is the agent's environment (without the host's variables).
	env []string
	// token is the service token (MicroVMs).
	token string
	// values are the secret values, for the redactor.
	values []string
}

// prepareEnv reads the host's environment: the service token, and the
// secret variables — on AgentCore from RAYITO_SECRET_ENV (names and
// secret ids: each read with src), on MicroVMs from the variables
// RAYITO_SECRET_ENV_NAMES names (the caller put the values in the host's
// environment). Every name is checked again against the reserved table.
// The agent's environment keeps neither RAYITO_SECRET_ENV,
// RAYITO_SECRET_ENV_NAMES nor the token.
func prepareEnv(ctx context.Context, target Target, environ []string, src SecretSource) (*agentEnv, error) {
	vars := map[string]string{}
	var order []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := vars[k]; !dup {
			order = append(order, k)
		}
		vars[k] = v
	}
	out := &agentEnv{token: vars[TokenVariable]}
	drop := map[string]bool{TokenVariable: true, secretenv.Variable: true, secretenv.NamesVariable: true}
	secrets := map[string]string{}
	switch target {
	case TargetAgentCore:
		if raw, ok := vars[secretenv.Variable]; ok && raw != "" {
			entries, err := secretenv.Decode(raw)
			if err != nil {
				return nil, err
			}
			if src == nil {
				return nil, &secretenv.Error{Code: secretenv.CodeFetchFailed}
			}
			for _, e := range entries {
				s, err := src.SecretString(ctx, e.Secret)
				if err != nil {
					var se *secretenv.Error
					if errors.As(err, &se) {
						return nil, &secretenv.Error{Code: se.Code, Name: e.Name}
					}
					return nil, &secretenv.Error{Code: secretenv.CodeFetchFailed, Name: e.Name}
				}
				v, err := e.Value(s)
				if err != nil {
					return nil, err
				}
				secrets[e.Name] = v
			}
		}
	case TargetMicroVM:
		if raw := vars[secretenv.NamesVariable]; raw != "" {
			names := strings.Split(raw, ",")
			if len(names) > secretenv.MaxEntries {
				return nil, &secretenv.Error{Code: secretenv.CodeTooMany}
			}
			for _, n := range names {
				if err := secretenv.CheckName(n); err != nil {
					return nil, err
				}
				if _, dup := secrets[n]; dup {
					return nil, &secretenv.Error{Code: secretenv.CodeDuplicate, Name: n}
				}
				v, ok := vars[n]
				if !ok {
					return nil, &secretenv.Error{Code: secretenv.CodeMissingValues, Name: n}
				}
				if len(v) > secretenv.MaxValueBytes {
					return nil, &secretenv.Error{Code: secretenv.CodeValueInvalid, Name: n}
				}
				secrets[n] = v
			}
		}
	}
	for _, k := range order {
		if drop[k] {
			continue
		}
		if _, isSecret := secrets[k]; isSecret {
			continue
		}
		out.env = append(out.env, k+"="+vars[k])
	}
	for _, k := range slices.Sorted(maps.Keys(secrets)) {
		out.env = append(out.env, k+"="+secrets[k])
		out.values = append(out.values, secrets[k])
	}
	return out, nil
}

// setenv replaces or adds k in env.
func setenv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// unsetHostVariables removes the host's own variables from the process
// environment (a dump of the host then shows them no more either).
func unsetHostVariables() {
	for _, k := range []string{TokenVariable, secretenv.Variable, secretenv.NamesVariable} {
		_ = os.Unsetenv(k)
	}
}
