package agent

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// mvPlan is what deploy --target microvm creates.
type mvPlan struct {
	Agent     string            `json:"agent"`
	Template  string            `json:"template"`
	Files     string            `json:"files"`
	Internet  bool              `json:"internet"`
	AllowOut  []string          `json:"allow_out"`
	Gateway   *mvGateway        `json:"gateway,omitempty"`
	Host      []string          `json:"host"`
	Port      int               `json:"port"`
	SecretEnv []secretenv.Entry `json:"secret_env"`
	Token     string            `json:"service_token"`
}

type mvGateway struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Env      string `json:"env"`
	Secret   string `json:"key_secret"`
}

// gatewayOf is the project model's gateway route (nil without a model
// key): the provider's preset, the key added by the gateway.
func gatewayOf(p *project.Project) (*secrets.Gateway, error) {
	m := p.Model
	if m == nil || m.KeySecret == "" {
		return nil, nil
	}
	key := secrets.Ref{Name: m.KeySecret}
	var g secrets.Gateway
	switch m.Provider {
	case "bedrock":
		g = secrets.BedrockGateway(m.Region, key, m.ID)
	case "anthropic":
		g = secrets.AnthropicGateway(key)
	case "openai":
		g = secrets.OpenAIGateway(key)
	case "openai-compatible":
		u, err := url.Parse(m.BaseURL)
		if err != nil || u.Host == "" {
			return nil, cliutil.Usagef("model.base_url is not a URL")
		}
		g = secrets.OpenAICompatibleGateway("model", "https://"+u.Host, u.Path, key, "OPENAI_BASE_URL")
	default:
		return nil, cliutil.Usagef("model.provider %q has no gateway", m.Provider)
	}
	return &g, nil
}

func microVMPlan(p *project.Project) (*mvPlan, error) {
	entries, err := p.Entries()
	if err != nil {
		return nil, cliutil.Usage(err)
	}
	pl := &mvPlan{
		Agent: p.Name, Template: "agent-" + p.Name, Files: "the project directory → /opt/agent/app; rayito-agent-host → /opt/agent/bin",
		Host: append([]string{"/opt/agent/bin/rayito-agent-host", "--target", "microvm", "--listen", fmt.Sprintf("0.0.0.0:%d", hostPort), "--dir", "/opt/agent/app", "--token-stdin", "--"}, p.Command...),
		Port: hostPort, SecretEnv: entries, Token: "new, given to the host on its stdin (in no environment), kept 0600 in the state directory (rayito agent invoke sends it)",
	}
	if p.Egress != nil {
		pl.AllowOut = slices.Clone(p.Egress.Allow)
	}
	g, err := gatewayOf(p)
	if err != nil {
		return nil, err
	}
	if g != nil {
		pl.Gateway = &mvGateway{Name: g.Name, Upstream: g.Upstream, Env: g.Env, Secret: p.Model.KeySecret}
	}
	return pl, nil
}

func writeMicroVMPlan(w io.Writer, pl *mvPlan) {
	fmt.Fprintf(w, "agent %s → Rayito MicroVM\n", pl.Agent)
	fmt.Fprintf(w, "template   %s: %s\n", pl.Template, pl.Files)
	allow := "nothing"
	if len(pl.AllowOut) > 0 {
		allow = strings.Join(pl.AllowOut, ", ")
	}
	fmt.Fprintf(w, "sandbox    Internet denied; allowed out: %s\n", allow)
	if g := pl.Gateway; g != nil {
		fmt.Fprintf(w, "gateway    route %s → %s, key from secret %q added by the gateway (the agent finds the URL in %s, never the key)\n", g.Name, g.Upstream, g.Secret, g.Env)
	} else {
		fmt.Fprintln(w, "gateway    none (the project's model has no key_secret)")
	}
	fmt.Fprintf(w, "host       %s, port %d\n", strings.Join(pl.Host, " "), pl.Port)
	fmt.Fprintf(w, "token      %s\n", pl.Token)
	writeSecretEnv(w, pl.SecretEnv, "read with your credentials at start; the values travel only in the host's start request")
}

func writeSecretEnv(w io.Writer, entries []secretenv.Entry, how string) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "secret env none")
		return
	}
	fmt.Fprintf(w, "secret env %d variables (%s):\n", len(entries), how)
	for _, e := range entries {
		if e.Key != "" {
			fmt.Fprintf(w, "  %-24s ← key %q of secret %s\n", e.Name, e.Key, e.Secret)
		} else {
			fmt.Fprintf(w, "  %-24s ← secret %s\n", e.Name, e.Secret)
		}
	}
}

func writeAgentCorePlan(w io.Writer, pl *agentcore.Plan) {
	fmt.Fprintf(w, "agent %s → Amazon Bedrock AgentCore\n", pl.Agent)
	if pl.Note != "" {
		fmt.Fprintf(w, "note       %s\n", pl.Note)
	}
	fmt.Fprintf(w, "stack      %s (infra/agentcore-runtime.yaml)\n", pl.Stack)
	fmt.Fprintf(w, "runtime    %s, description %q, MMDSv2 turned on after create and every update\n", pl.Runtime, pl.Description)
	fmt.Fprintf(w, "repository %s (ECR: immutable tags, scan on push)\n", pl.Repository)
	fmt.Fprintf(w, "build      CodeBuild from %s\n", pl.BuildContext)
	for _, r := range pl.Roles {
		fmt.Fprintf(w, "role       %s, assumed only by %s (%s)\n", r.Name, r.TrustedBy, strings.Join(r.Conditions, "; "))
		for _, s := range r.Statements {
			cond := ""
			for k, v := range s.Condition {
				cond = fmt.Sprintf(" when %s = %s", k, v)
			}
			fmt.Fprintf(w, "  %-24s %s %s on %s%s\n", s.Sid, s.Effect, strings.Join(s.Action, ", "), strings.Join(s.Resource, ", "), cond)
		}
	}
	if len(pl.Environment) == 0 {
		fmt.Fprintln(w, "environment none")
	}
	for _, k := range sortedKeys(pl.Environment) {
		fmt.Fprintf(w, "environment %s=%s (names and ARNs only: the host reads the values with the role)\n", k, pl.Environment[k])
	}
	ext := "none (Bedrock only, with the role)"
	if pl.ExternalModel != "" {
		ext = pl.ExternalModel
	}
	fmt.Fprintf(w, "externalModel %s\n", ext)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
