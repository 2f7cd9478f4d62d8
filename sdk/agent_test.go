package rayito

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/sdk/agentrunner"
)

// TestAgentOptions: what is not built answers an *UnimplementedError,
// wrong options ErrInvalidArgument, before anything reaches the sandbox.
func TestAgentOptions(t *testing.T) {
	a := (&Sandbox{}).Agent()
	model := AgentModel{Provider: ProviderOpenAICompatible, ID: "m", Gateway: "model"}
	unimpl := map[string][]AgentOption{
		"session": {WithAgentModel(model), WithAgentSession("s")},
	}
	for name, opts := range unimpl {
		_, err := a.Run(context.Background(), "task", opts...)
		var ue *UnimplementedError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnimplemented) || ue.Doc == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	invalid := map[string][]AgentOption{
		"no model":                       nil,
		"provider":                       {WithAgentModel(AgentModel{Provider: "nope", ID: "m", Gateway: "g"})},
		"runtime":                        {WithAgentModel(model), WithAgentRuntime("nope")},
		"workdir":                        {WithAgentModel(model), WithAgentWorkdir("rel")},
		"limits":                         {WithAgentModel(model), WithAgentLimits(AgentLimits{MaxSteps: -1})},
		"no such route":                  {WithAgentModel(model)},
		"tool name":                      {WithAgentRuntime(AgentRuntimeOpenCode), WithAgentSpec(AgentSpec{Model: model, Permissions: []AgentPermission{{Tool: "Bash!"}}})},
		"too long":                       {WithAgentSpec(AgentSpec{Model: model, Instructions: strings.Repeat("x", MaxAgentInputBytes)})},
		"base path":                      {WithAgentModel(AgentModel{Provider: ProviderOpenAI, ID: "m", Gateway: "model", BasePath: "v1"})},
		"small model without sub-agents": {WithAgentSpec(AgentSpec{Model: model, SmallModel: &model})},
	}
	for name, opts := range invalid {
		if _, err := a.Run(context.Background(), "task", opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := a.Run(context.Background(), "  ", WithAgentModel(model)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty task: %v", err)
	}
}

// TestAgentTemplate: the template installs the pinned runtime, checking
// the tarballs with sha256sum -c before npm ci, and writes the manifest;
// OpenCode is not built.
func TestAgentTemplate(t *testing.T) {
	if tpl, err := AgentTemplate(); err != nil || tpl.Err() != nil {
		t.Fatal(err)
	}
	if _, err := AgentTemplate(WithAgentRuntimes(AgentRuntimeOpenCode, AgentRuntimeDeepAgents)); err != nil {
		t.Errorf("both: %v", err)
	}
	if _, err := AgentTemplate(WithAgentRuntimes(AgentRuntimeOpenCode, AgentRuntimeOpenCode)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("twice: %v", err)
	}
	if _, err := AgentTemplate(WithAgentRuntimes()); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no runtime: %v", err)
	}
	if _, err := AgentTemplate(WithAgentRuntimes("nope")); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown runtime: %v", err)
	}
	s := installScript(AgentRuntimeDeepAgents, "/opt/agents/deepagents", mustPins(t, "deepagents"))
	iSum, iCI := strings.Index(s, "sha256sum -c"), strings.Index(s, "npm ci")
	if iSum < 0 || iCI < 0 || iSum > iCI || !strings.Contains(s, "set -eu") || !strings.Contains(s, "deepagents@1.14.1") {
		t.Errorf("install script:\n%s", s)
	}
	s = installScript(AgentRuntimeOpenCode, "/opt/agents/opencode", mustPins(t, "opencode"))
	iSum, iTar := strings.Index(s, "sha256sum -c"), strings.Index(s, "tar -xzf")
	if iSum < 0 || iTar < 0 || iSum > iTar || !strings.Contains(s, "uname -m") || !strings.Contains(s, "opencode-linux-x64@1.18.33") {
		t.Errorf("install script:\n%s", s)
	}
}

func mustPins(t *testing.T, rt string) agentrunner.Runtime {
	t.Helper()
	p, err := agentrunner.LoadPins()
	if err != nil {
		t.Fatal(err)
	}
	return p.Runtimes[rt]
}
