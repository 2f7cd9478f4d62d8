package rayito

import (
	"fmt"
	"strings"
)

// The model providers (AgentModel.Provider), the gateway preset each is
// meant for, and the API each runtime speaks through the route:
//
//   - ProviderOpenAI, ProviderOpenAICompatible: OpenAIGateway,
//     secrets.OpenAICompatibleGateway (and the other OpenAI-style presets); chat
//     completions at the route's URL followed by AgentModel.BasePath
//     (default "/v1").
//   - ProviderAnthropic: secrets.AnthropicGateway; the Messages API, POST
//     /v1/messages (x-api-key).
//   - ProviderGoogle: GeminiGateway with the model among its models; POST
//     /v1beta/models/ID:streamGenerateContent (x-goog-api-key).
//   - ProviderAzure: AzureOpenAIGateway; Azure OpenAI's v1 API, POST
//     /openai/v1/chat/completions with AgentModel.ID (the deployment's
//     name) as the model (api-key).
//   - ProviderBedrock: BedrockGateway in AgentModel.Region (required) with
//     the model among its models; Converse and ConverseStream, POST
//     /model/ID/converse-stream, with a Bedrock API key as a bearer token
//     (no SigV4, no AWS credentials in the sandbox).
//
// BasePath is for the OpenAI-style providers only: the others' paths are
// fixed by their API. Every client is given a placeholder key
// ("rayito-gateway") that the gateway drops before adding the real one.

// agentDefaultBasePath is the OpenAI-style providers' default base path.
const agentDefaultBasePath = "/v1"

// maxAgentModelID bounds AgentModel.ID.
const maxAgentModelID = 256

// agentModelEntry checks m and turns it into the job's model entry: its
// provider, id, region (Bedrock) and base URL, the loopback URL of the
// gateway route m.Gateway (gatewayURL answers it, false when the sandbox
// has no such route) followed by the base path for the OpenAI-style
// providers. what names the field in errors ("AgentSpec.Model").
func agentModelEntry(m AgentModel, what string, gatewayURL func(name string) (string, bool)) (agentJobModel, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidArgument, what}, args...)...)
	}
	switch m.Provider {
	case ProviderOpenAI, ProviderOpenAICompatible, ProviderAnthropic, ProviderGoogle, ProviderAzure, ProviderBedrock:
	default:
		return agentJobModel{}, invalid("unknown agent model provider %q", m.Provider)
	}
	if m.ID == "" || m.Gateway == "" {
		return agentJobModel{}, invalid("the agent's model needs an id and a gateway route")
	}
	if !validAgentModelID(m.Provider, m.ID) {
		return agentJobModel{}, invalid("the model id must be at most %d printable ASCII bytes without spaces (for google: letters, digits, '.', '_' and '-')", maxAgentModelID)
	}
	if m.Provider == ProviderBedrock {
		if !validAWSRegion(m.Region) {
			return agentJobModel{}, invalid("a bedrock model needs its region (like us-east-1)")
		}
	} else if m.Region != "" {
		return agentJobModel{}, invalid("AgentModel.Region is for bedrock only")
	}
	base := ""
	switch m.Provider {
	case ProviderOpenAI, ProviderOpenAICompatible:
		base = m.BasePath
		if base == "" {
			base = agentDefaultBasePath
		}
		if !strings.HasPrefix(base, "/") || strings.ContainsAny(base, "?#") {
			return agentJobModel{}, invalid("the model's base path must start with /")
		}
		base = strings.TrimSuffix(base, "/")
	default:
		if m.BasePath != "" {
			return agentJobModel{}, invalid("AgentModel.BasePath is for openai and openai-compatible only (the %s API's paths are fixed)", m.Provider)
		}
	}
	url, ok := gatewayURL(m.Gateway)
	if !ok {
		return agentJobModel{}, invalid("the sandbox has no gateway route %q", m.Gateway)
	}
	return agentJobModel{Provider: string(m.Provider), ID: m.ID, BaseURL: url + base, Region: m.Region}, nil
}

// validAgentModelID: at most maxAgentModelID printable ASCII bytes
// without spaces; Gemini's (in the request path as is) only letters,
// digits, '.', '_' and '-'.
func validAgentModelID(p AgentProvider, id string) bool {
	if len(id) > maxAgentModelID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c >= 0x7f {
			return false
		}
		if p == ProviderGoogle && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validAWSRegion: lower-case letters, digits and '-' (like us-east-1 or
// us-gov-west-1), starting with a letter, at most 32 bytes.
func validAWSRegion(r string) bool {
	if r == "" || len(r) > 32 || r[0] < 'a' || r[0] > 'z' || r[len(r)-1] == '-' || !strings.Contains(r, "-") {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// agentSmallModelEntry is the job's small model entry: OpenCode's
// small_model (it generates the session's title with it, instead of
// the fixed title the runner gives when there is none); under Deep
// Agents the model of the spec's sub-agents.
func agentSmallModelEntry(rt AgentRuntime, m *AgentModel, gatewayURL func(name string) (string, bool)) (*agentJobModel, error) {
	if m == nil {
		return nil, nil
	}
	e, err := agentModelEntry(*m, "AgentSpec.SmallModel", gatewayURL)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// agentSmallModelSupported checks that the runtime has a use for the
// spec's small model: OpenCode always (the session's title); Deep Agents
// for the spec's sub-agents (ErrInvalidArgument without any: the small
// model would be ignored).
func agentSmallModelSupported(rt AgentRuntime, sp AgentSpec) error {
	if rt == AgentRuntimeDeepAgents && len(sp.SubAgents) == 0 {
		return fmt.Errorf("%w: under Deep Agents AgentSpec.SmallModel runs the spec's sub-agents: give SubAgents", ErrInvalidArgument)
	}
	return nil
}

// gatewayURLOf answers agentModelEntry's route lookups from the sandbox.
func (a *Agent) gatewayURLOf(name string) (string, bool) {
	gw := a.sbx.Gateway(name)
	if gw == nil {
		return "", false
	}
	return gw.URL(), true
}
