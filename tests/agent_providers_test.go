package tests

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
	"github.com/rayito-dev/rayito/tests/agentllm"
)

// The providers' real hosts: the test DNS resolves them to the scripted
// model and testPKI signs them, so the gateway presets are used exactly as
// users use them.
const (
	agentAzureResource = "rayito-test"
	agentBedrockRegion = "us-east-1"
)

var agentProviderHosts = []string{
	"api.anthropic.com",
	"generativelanguage.googleapis.com",
	agentAzureResource + ".openai.azure.com",
	"bedrock-runtime." + agentBedrockRegion + ".amazonaws.com",
}

// withAgentProviderHosts adds the providers' hosts, at the scripted
// model's address, to a DNS map.
func withAgentProviderHosts(m map[string]netip.Addr) map[string]netip.Addr {
	for _, h := range agentProviderHosts {
		m[h+"."] = agentModel
	}
	return m
}

// agentProviders (TestAgent's "providers"): a sandbox of the agent
// template with the four providers' gateway presets (Internet access
// denied); for each provider under each runtime a short task (a command
// that writes a file, then text) finishes, the file is there, and the
// scripted model saw every request with the key in the provider's header
// (the gateway's), on the provider's API, for the spec's model. Also:
// AgentModel.Region refused for another provider than bedrock, and
// OpenCode's small model reaching its own provider.
func agentProviders(t *testing.T, ctx context.Context, p *platform, store secrets.Store, model *scriptSwitch, canary string) {
	key := secrets.Ref{Name: "model-key"}
	const (
		anthropicID = "claude-test-1"
		geminiID    = "gemini-test-1"
		geminiSmall = "gemini-small-1"
		azureID     = "dep-test-1"
		bedrockID   = "anthropic.claude-test-v1:0"
	)
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("agent"), secrets.WithStore(store),
		rayito.WithAllowInternetAccess(false), rayito.WithTimeout(15*time.Minute),
		secrets.WithGateways(
			secrets.AnthropicGateway(key),
			secrets.GeminiGateway(key, geminiID, geminiSmall),
			secrets.AzureOpenAIGateway(agentAzureResource, key, azureID),
			secrets.BedrockGateway(agentBedrockRegion, key, bedrockID),
		))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	agent := sbx.Agent()
	models := []struct {
		m    rayito.AgentModel
		wire agentllm.Provider
	}{
		{rayito.AgentModel{Provider: rayito.ProviderAnthropic, ID: anthropicID, Gateway: "anthropic"}, agentllm.ProviderAnthropic},
		{rayito.AgentModel{Provider: rayito.ProviderGoogle, ID: geminiID, Gateway: "gemini"}, agentllm.ProviderGoogle},
		{rayito.AgentModel{Provider: rayito.ProviderAzure, ID: azureID, Gateway: "azure-openai"}, agentllm.ProviderAzure},
		{rayito.AgentModel{Provider: rayito.ProviderBedrock, ID: bedrockID, Gateway: "bedrock", Region: agentBedrockRegion}, agentllm.ProviderBedrock},
	}
	for _, rt := range []rayito.AgentRuntime{rayito.AgentRuntimeDeepAgents, rayito.AgentRuntimeOpenCode} {
		for _, c := range models {
			name := string(c.m.Provider) + "-" + string(rt)
			file := "/home/user/provider-" + name + ".txt"
			call := agentllm.ToolCall{Name: "execute", Args: map[string]any{"command": "echo " + name + " > " + file}}
			if rt == rayito.AgentRuntimeOpenCode {
				call = agentllm.ToolCall{Name: "bash", Args: map[string]any{"command": "echo " + name + " > " + file, "description": "write"}}
			}
			script := &agentllm.Script{Key: canary, Turns: []agentllm.Turn{
				{Calls: []agentllm.ToolCall{call}, PromptTokens: 20, CompletionTokens: 2},
				{Text: "Done with " + name + ".", PromptTokens: 30, CompletionTokens: 3},
			}}
			model.cur.Store(script)
			spec := rayito.AgentSpec{Model: c.m, Instructions: "RAYITO-INSTRUCTIONS-MARKER"}
			res, err := agent.Run(ctx, "write the file", rayito.WithAgentSpec(spec), rayito.WithAgentRuntime(rt))
			if err != nil || res.Text != "Done with "+name+"." || res.Steps != 2 || res.Usage.InputTokens != 50 || res.Usage.OutputTokens != 5 {
				t.Errorf("%s: %+v %v", name, res, err)
			}
			if out, _ := sh(ctx, t, sbx, "cat "+file); out != name+"\n" {
				t.Errorf("%s: the file: %q", name, out)
			}
			reqs := script.Requests()
			if len(reqs) != 2 {
				t.Errorf("%s: %d model requests, want 2", name, len(reqs))
			}
			for _, r := range reqs {
				if !r.Authorized || !r.Stream || r.Provider != c.wire || r.Model != c.m.ID || !strings.Contains(r.Body, "RAYITO-INSTRUCTIONS-MARKER") {
					t.Errorf("%s: a model request: %+v", name, agentllm.Request{Provider: r.Provider, Authorized: r.Authorized, Stream: r.Stream, Model: r.Model})
				}
			}
		}
	}

	// Region is Bedrock's only.
	withRegion := rayito.AgentModel{Provider: rayito.ProviderAnthropic, ID: anthropicID, Gateway: "anthropic", Region: agentBedrockRegion}
	if _, err := agent.Run(ctx, "x", rayito.WithAgentModel(withRegion)); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("a region for anthropic: %v", err)
	}

	// OpenCode's small model, on another provider and route, writes the
	// session's title.
	script := &agentllm.Script{Key: canary, Turns: []agentllm.Turn{{Text: "ok"}, {Text: "ok"}}}
	model.cur.Store(script)
	small := rayito.AgentModel{Provider: rayito.ProviderGoogle, ID: geminiSmall, Gateway: "gemini"}
	spec := rayito.AgentSpec{Model: models[0].m, SmallModel: &small}
	if _, err := agent.Run(ctx, "say ok", rayito.WithAgentSpec(spec), rayito.WithAgentRuntime(rayito.AgentRuntimeOpenCode)); err != nil {
		t.Errorf("with a small model: %v", err)
	}
	var sawSmall, sawMain bool
	for _, r := range script.Requests() {
		sawSmall = sawSmall || r.Authorized && r.Provider == agentllm.ProviderGoogle && r.Model == geminiSmall
		sawMain = sawMain || r.Authorized && r.Provider == agentllm.ProviderAnthropic && r.Model == anthropicID
	}
	if !sawSmall || !sawMain {
		t.Errorf("the small model's request: small %v, main %v", sawSmall, sawMain)
	}
	if _, err := agent.Run(ctx, "x", rayito.WithAgentSpec(spec)); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("a small model under Deep Agents without sub-agents: %v", err)
	}
	if out, _ := sh(ctx, t, sbx, "grep -rIlF -e "+canary+" /home/user /tmp /opt/agents 2>/dev/null; true"); strings.TrimSpace(out) != "" {
		t.Errorf("the key is in files: %q", out)
	}
}
