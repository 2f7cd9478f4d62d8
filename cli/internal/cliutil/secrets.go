package cliutil

import (
	"strings"

	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// SecretFlags are the secret flags of create and run. They name secrets
// of the secret store (`rayito secret`), never values.
func SecretFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "secret", Usage: "`ENV=NAME[@VERSION]`: every command gets the secret NAME of the store in ENV (readable by the sandbox's code; repeatable)"},
		&cli.StringSliceFlag{Name: "gateway", Usage: "a secret gateway `ROUTE` (repeatable): preset:PROVIDER=SECRET, PROVIDER one of anthropic, openai, openrouter, groq, mistral, deepseek, xai, gemini (with ,model=M...) or bedrock (with ,model=M...,region=R); or name=N,upstream=https://HOST,allow=METHOD:PATH with ,header=NAME:SECRET or ,bearer=SECRET, more ,allow=... and ,env=VAR. The sandbox calls http://127.0.0.1:PORT and never sees the secret"},
		&cli.StringSliceFlag{Name: "placeholder", Usage: "`ENV=SECRET@HOST`: the sandbox sees a placeholder in ENV, which rayd replaces with the secret in requests to https://HOST only (repeatable)"},
	}
}

// secretRef parses NAME[@VERSION].
func secretRef(flag, s string) (secrets.Ref, error) {
	name, version, _ := strings.Cut(s, "@")
	if err := secrets.ValidateName(name); err != nil {
		return secrets.Ref{}, Usagef("%s: %v", flag, err)
	}
	return secrets.Ref{Name: name, Version: version}, nil
}

// SecretOptions returns the SDK options of the secret flags.
func SecretOptions(cmd *cli.Command) ([]rayito.Option, error) {
	var opts []rayito.Option
	if kvs := cmd.StringSlice("secret"); len(kvs) > 0 {
		m := map[string]secrets.Ref{}
		for _, kv := range kvs {
			env, name, ok := strings.Cut(kv, "=")
			if !ok || env == "" {
				return nil, Usagef("--secret wants ENV=NAME")
			}
			ref, err := secretRef("--secret", name)
			if err != nil {
				return nil, err
			}
			m[env] = ref
		}
		opts = append(opts, secrets.WithSecrets(m))
	}
	var routes []secrets.Gateway
	for _, spec := range cmd.StringSlice("gateway") {
		g, err := parseGateway(spec)
		if err != nil {
			return nil, err
		}
		routes = append(routes, g)
	}
	if len(routes) > 0 {
		opts = append(opts, secrets.WithGateways(routes...))
	}
	var phs []secrets.Placeholder
	for _, kv := range cmd.StringSlice("placeholder") {
		env, rest, ok := strings.Cut(kv, "=")
		at := strings.LastIndexByte(rest, '@')
		if !ok || env == "" || at <= 0 || at == len(rest)-1 {
			return nil, Usagef("--placeholder wants ENV=SECRET@HOST")
		}
		ref, err := secretRef("--placeholder", rest[:at])
		if err != nil {
			return nil, err
		}
		phs = append(phs, secrets.Placeholder{Env: env, Secret: ref, Host: rest[at+1:]})
	}
	if len(phs) > 0 {
		opts = append(opts, secrets.WithPlaceholders(phs...))
	}
	return opts, nil
}

// parseGateway parses one --gateway.
func parseGateway(spec string) (secrets.Gateway, error) {
	bad := func(format string, args ...any) (secrets.Gateway, error) {
		return secrets.Gateway{}, Usagef("--gateway: "+format, args...)
	}
	var preset, presetSecret, region string
	var models []string
	var g secrets.Gateway
	for i, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return bad("%q is not KEY=VALUE", k)
		}
		if i == 0 && strings.HasPrefix(k, "preset:") {
			preset, presetSecret = strings.TrimPrefix(k, "preset:"), v
			continue
		}
		switch k {
		case "model":
			models = append(models, v)
		case "region":
			region = v
		case "name":
			g.Name = v
		case "upstream":
			g.Upstream = v
		case "env":
			g.Env = v
		case "header":
			name, secret, ok := strings.Cut(v, ":")
			if !ok {
				return bad("header wants NAME:SECRET")
			}
			ref, err := secretRef("--gateway header", secret)
			if err != nil {
				return secrets.Gateway{}, err
			}
			if g.Headers == nil {
				g.Headers = map[string]secrets.HeaderValue{}
			}
			g.Headers[name] = secrets.Plain(ref)
		case "bearer":
			ref, err := secretRef("--gateway bearer", v)
			if err != nil {
				return secrets.Gateway{}, err
			}
			if g.Headers == nil {
				g.Headers = map[string]secrets.HeaderValue{}
			}
			g.Headers["Authorization"] = secrets.Bearer(ref)
		case "allow":
			method, path, ok := strings.Cut(v, ":")
			if !ok {
				return bad("allow wants METHOD:PATH")
			}
			g.Allow = append(g.Allow, secrets.GatewayRule{Method: method, Path: path})
		default:
			return bad("unknown key %q", k)
		}
	}
	if preset == "" {
		if g.Name == "" || g.Upstream == "" || len(g.Allow) == 0 {
			return bad("a route needs name=, upstream= and at least one allow= (or preset:PROVIDER=SECRET)")
		}
		return g, nil
	}
	ref, err := secretRef("--gateway", presetSecret)
	if err != nil {
		return secrets.Gateway{}, err
	}
	out, err := gatewayPreset(preset, ref, region, models)
	if err != nil {
		return secrets.Gateway{}, err
	}
	if (len(models) > 0 || region != "") && preset != "gemini" && preset != "bedrock" {
		return bad("preset:%s takes no model= or region=", preset)
	}
	if g.Env != "" {
		out.Env = g.Env
	}
	if g.Name != "" {
		out.Name = g.Name
	}
	return out, nil
}

// gatewayPreset is the route of preset (preset:PROVIDER=SECRET) with the
// key ref; gemini and bedrock take the models (and bedrock the region).
func gatewayPreset(preset string, ref secrets.Ref, region string, models []string) (secrets.Gateway, error) {
	bad := func(format string, args ...any) (secrets.Gateway, error) {
		return secrets.Gateway{}, Usagef("--gateway: "+format, args...)
	}
	var out secrets.Gateway
	switch preset {
	case "anthropic":
		out = secrets.AnthropicGateway(ref)
	case "openai":
		out = secrets.OpenAIGateway(ref)
	case "openrouter":
		out = secrets.OpenRouterGateway(ref)
	case "groq":
		out = secrets.GroqGateway(ref)
	case "mistral":
		out = secrets.MistralGateway(ref)
	case "deepseek":
		out = secrets.DeepSeekGateway(ref)
	case "xai":
		out = secrets.XAIGateway(ref)
	case "gemini":
		if len(models) == 0 {
			return bad("preset:gemini needs model=M (the gateway opens only the given models)")
		}
		out = secrets.GeminiGateway(ref, models...)
	case "bedrock":
		if len(models) == 0 || region == "" {
			return bad("preset:bedrock needs region=R and model=M (the gateway never opens /model/*)")
		}
		out = secrets.BedrockGateway(region, ref, models...)
	default:
		return bad("unknown preset %q", preset)
	}
	return out, nil
}
