package rayito

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// agentTestSandbox is a sandbox value with gateway routes (no platform):
// enough for prepare.
func agentTestSandbox(routes map[string]uint16) *Sandbox {
	s := &Sandbox{}
	s.gateways.routes = routes
	return s
}

// TestAgentProviders: each provider's job model entry (the route's URL,
// the base path only for the OpenAI-style ones, the region only for
// bedrock), and the small model's under each runtime.
func TestAgentProviders(t *testing.T) {
	a := agentTestSandbox(map[string]uint16{"model": 41001, "anthropic": 41002, "gemini": 41003, "azure-openai": 41004, "bedrock": 41005}).Agent()
	url := func(port string) string { return "http://127.0.0.1:" + port }
	for _, c := range []struct {
		m    AgentModel
		want agentJobModel
	}{
		{AgentModel{Provider: ProviderOpenAICompatible, ID: "m", Gateway: "model"}, agentJobModel{"openai-compatible", "m", url("41001") + "/v1", ""}},
		{AgentModel{Provider: ProviderOpenAI, ID: "gpt", Gateway: "model", BasePath: "/api/v1/"}, agentJobModel{"openai", "gpt", url("41001") + "/api/v1", ""}},
		{AgentModel{Provider: ProviderAnthropic, ID: "claude-x", Gateway: "anthropic"}, agentJobModel{"anthropic", "claude-x", url("41002"), ""}},
		{AgentModel{Provider: ProviderGoogle, ID: "gemini-2.5-flash", Gateway: "gemini"}, agentJobModel{"google", "gemini-2.5-flash", url("41003"), ""}},
		{AgentModel{Provider: ProviderAzure, ID: "my-deployment", Gateway: "azure-openai"}, agentJobModel{"azure", "my-deployment", url("41004"), ""}},
		{AgentModel{Provider: ProviderBedrock, ID: "anthropic.claude-3-haiku-20240307-v1:0", Gateway: "bedrock", Region: "eu-west-3"},
			agentJobModel{"bedrock", "anthropic.claude-3-haiku-20240307-v1:0", url("41005"), "eu-west-3"}},
	} {
		for _, rt := range []AgentRuntime{AgentRuntimeDeepAgents, AgentRuntimeOpenCode} {
			_, job, err := a.prepare("task", []AgentOption{WithAgentModel(c.m), WithAgentRuntime(rt)})
			if err != nil || job.Model != c.want || job.SmallModel != nil {
				t.Errorf("%s under %s: %+v %v", c.m.Provider, rt, job, err)
				continue
			}
			raw, _ := json.Marshal(job)
			if !strings.Contains(string(raw), `"provider":"`+string(c.m.Provider)+`"`) {
				t.Errorf("the job: %s", raw)
			}
		}
	}

	// The small model: OpenCode's, through its own route; Deep Agents'
	// sub-agents'.
	main := AgentModel{Provider: ProviderAnthropic, ID: "big", Gateway: "anthropic"}
	small := AgentModel{Provider: ProviderGoogle, ID: "small", Gateway: "gemini"}
	_, job, err := a.prepare("task", []AgentOption{WithAgentSpec(AgentSpec{Model: main, SmallModel: &small}), WithAgentRuntime(AgentRuntimeOpenCode)})
	if err != nil || job.SmallModel == nil || *job.SmallModel != (agentJobModel{"google", "small", url("41003"), ""}) {
		t.Errorf("small model: %+v %v", job, err)
	}
	// Under Deep Agents it runs the sub-agents: without any it would be
	// ignored.
	if _, _, err := a.prepare("task", []AgentOption{WithAgentSpec(AgentSpec{Model: main, SmallModel: &small})}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "SubAgents") {
		t.Errorf("small model under Deep Agents without sub-agents: %v", err)
	}
	withSub := AgentSpec{Model: main, SmallModel: &small, SubAgents: []AgentSubAgent{{Name: "r", Description: "d", Instructions: "i"}}}
	if _, job, err := a.prepare("task", []AgentOption{WithAgentSpec(withSub)}); err != nil || job.SmallModel == nil || job.SmallModel.ID != "small" {
		t.Errorf("small model under Deep Agents: %+v %v", job, err)
	}
	bad := small
	bad.Region = "us-east-1"
	if _, _, err := a.prepare("task", []AgentOption{WithAgentSpec(AgentSpec{Model: main, SmallModel: &bad}), WithAgentRuntime(AgentRuntimeOpenCode)}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "SmallModel") {
		t.Errorf("a wrong small model: %v", err)
	}

	// Wrong models: ErrInvalidArgument, naming no secret.
	for name, m := range map[string]AgentModel{
		"region elsewhere":   {Provider: ProviderAnthropic, ID: "m", Gateway: "anthropic", Region: "us-east-1"},
		"region for openai":  {Provider: ProviderOpenAI, ID: "m", Gateway: "model", Region: "us-east-1"},
		"no bedrock region":  {Provider: ProviderBedrock, ID: "m", Gateway: "bedrock"},
		"bad bedrock region": {Provider: ProviderBedrock, ID: "m", Gateway: "bedrock", Region: "US_EAST"},
		"region with a path": {Provider: ProviderBedrock, ID: "m", Gateway: "bedrock", Region: "us-east-1/../x"},
		"base path":          {Provider: ProviderAnthropic, ID: "m", Gateway: "anthropic", BasePath: "/v1"},
		"gemini id":          {Provider: ProviderGoogle, ID: "m:generateContent", Gateway: "gemini"},
		"gemini path":        {Provider: ProviderGoogle, ID: "../files", Gateway: "gemini"},
		"space in id":        {Provider: ProviderAzure, ID: "a b", Gateway: "azure-openai"},
		"long id":            {Provider: ProviderBedrock, ID: strings.Repeat("m", 300), Gateway: "bedrock", Region: "us-east-1"},
		"no route":           {Provider: ProviderAzure, ID: "d", Gateway: "nope"},
		"no id":              {Provider: ProviderAzure, Gateway: "azure-openai"},
		"provider":           {Provider: "vertex", ID: "m", Gateway: "gemini"},
	} {
		if _, _, err := a.prepare("task", []AgentOption{WithAgentModel(m)}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzAgentModelEntry: any model answers an entry or ErrInvalidArgument,
// never a panic; an entry's base URL is the route's (plus a base path
// for the OpenAI-style providers) and its region is set for bedrock only.
func FuzzAgentModelEntry(f *testing.F) {
	f.Add("bedrock", "anthropic.claude-v2:1", "us-east-1", "")
	f.Add("google", "gemini-2.5-pro", "", "")
	f.Add("openai", "gpt", "", "/v1")
	f.Add("azure", "dep", "x", "/x")
	f.Fuzz(func(t *testing.T, provider, id, region, base string) {
		m := AgentModel{Provider: AgentProvider(provider), ID: id, Region: region, BasePath: base, Gateway: "g"}
		e, err := agentModelEntry(m, "AgentSpec.Model", func(string) (string, bool) { return "http://127.0.0.1:1", true })
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if !strings.HasPrefix(e.BaseURL, "http://127.0.0.1:1") || strings.ContainsAny(e.BaseURL, "?#") {
			t.Fatalf("base URL %q", e.BaseURL)
		}
		if (e.Region != "") != (m.Provider == ProviderBedrock) || strings.ContainsAny(e.Region, "/.:") {
			t.Fatalf("region %q for %s", e.Region, m.Provider)
		}
	})
}
