package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/tests/agentllm"
)

// agentSpecFeatures (TestAgent's "spec" subtest, in TestAgent's sandbox):
// under each runtime one run where the scripted model delegates to a
// sub-agent (the task tool; the sub-agent's own model request carries
// its instructions), calls the tool of an MCP server that runs in the
// sandbox (stdio; its output reaches the events), then runs a command
// the permissions deny (answered, not run) and one they allow; under
// OpenCode the raw configuration reaches the model (an agent prompt), and
// a raw key Rayito sets is refused by name.
func agentSpecFeatures(t *testing.T, ctx context.Context, sbx *rayito.Sandbox, model *scriptSwitch, remote *agentllm.RemoteMCP, canary string, spec rayito.AgentSpec) {
	src, err := os.ReadFile("testdata/agent_mcp_server.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "/home/user/mcp_server.mjs", src); err != nil {
		t.Fatal(err)
	}
	spec.SubAgents = []rayito.AgentSubAgent{{Name: "reviewer", Description: "Reviews a change.", Instructions: "SUBAGENT-MARKER: you review."}}
	// A stdio server in the sandbox, and a remote one reached only through
	// the sandbox's gateway route "mcp" (which adds its key).
	spec.MCPServers = []rayito.AgentMCPServer{{Name: "mcp1", Command: []string{"node", "/home/user/mcp_server.mjs"}}, {Name: "remote", Gateway: "mcp", Path: "/mcp"}}
	// toolEnds are the ends (name status output) of a run's tool calls.
	run := func(t *testing.T, s rayito.AgentSpec, opts ...rayito.AgentOption) []string {
		t.Helper()
		var ends []string
		for ev, err := range sbx.Agent().Stream(ctx, "review, shout and touch", append(opts, rayito.WithAgentSpec(s))...) {
			if err != nil {
				t.Fatalf("stream: %v (tool calls %q)", err, ends)
			}
			if ev.Type == rayito.AgentEventToolCall && ev.ToolCall.Status != "started" {
				ends = append(ends, ev.ToolCall.Name+" "+ev.ToolCall.Status+" "+ev.ToolCall.Output)
			}
		}
		return ends
	}
	// requests checks the model's requests: all through the gateway, the
	// sub-agent's (the second) alone with its instructions, and marker in
	// the main agent's.
	requests := func(t *testing.T, script *agentllm.Script, n int, marker string) {
		t.Helper()
		rs := script.Requests()
		if len(rs) != n {
			t.Fatalf("%d model requests, want %d", len(rs), n)
		}
		for i, r := range rs {
			if !r.Authorized {
				t.Errorf("request %d did not pass the gateway", i)
			}
			if got := strings.Contains(r.Body, "SUBAGENT-MARKER"); got != (i == 1) {
				t.Errorf("request %d: the sub-agent's instructions %v", i, got)
			}
			if marker != "" && i != 1 && !strings.Contains(r.Body, marker) {
				t.Errorf("request %d: no %s", i, marker)
			}
		}
	}
	check := func(t *testing.T, ends []string, want []string, denied, allowed string) {
		t.Helper()
		if len(ends) != len(want) {
			t.Fatalf("tool calls %q", ends)
		}
		for i := range want {
			if !strings.HasPrefix(ends[i], want[i]) {
				t.Errorf("tool call %d: %q, want %q...", i, ends[i], want[i])
			}
		}
		out, _ := sbx.Commands.Run(ctx, "ls /home/user/"+denied+" /home/user/"+allowed+" 2>&1; true")
		if out == nil || !strings.Contains(out.Stdout, "No such file") || !strings.Contains(out.Stdout, "/home/user/"+allowed) {
			t.Errorf("files under permissions: %+v", out)
		}
	}

	t.Run("deepagents", func(t *testing.T) {
		script := &agentllm.Script{Key: canary, Turns: []agentllm.Turn{
			{Calls: []agentllm.ToolCall{{Name: "task", Args: map[string]any{"description": "Review the change.", "subagent_type": "reviewer"}}}},
			{Text: "reviewed: fine"}, // the sub-agent
			{Calls: []agentllm.ToolCall{{Name: "mcp1__shout", Args: map[string]any{"text": "hello mcp"}}}},
			{Calls: []agentllm.ToolCall{{Name: "remote__whisper", Args: map[string]any{"text": "Through The Gateway"}}}},
			{Calls: []agentllm.ToolCall{{Name: "execute", Args: map[string]any{"command": "touch denied-da.txt"}}}},
			{Calls: []agentllm.ToolCall{{Name: "execute", Args: map[string]any{"command": "touch allowed-da.txt"}}}},
			{Text: "done"},
		}}
		model.cur.Store(script)
		s := spec
		s.Permissions = []rayito.AgentPermission{{Tool: "execute", Pattern: "touch denied*", Allow: false}}
		s.RawConfig = json.RawMessage(`{"temperature": 0.2, "max_tokens": 2048}`)
		// The small model runs the sub-agent (same route, another id).
		s.SmallModel = &rayito.AgentModel{Provider: s.Model.Provider, ID: "scripted-small", Gateway: s.Model.Gateway}
		ends := run(t, s)
		// (Deep Agents gives a remote tool's result as its MCP JSON.)
		check(t, ends, []string{"task completed reviewed: fine", "mcp1__shout completed MCP-SHOUT:HELLO MCP", "remote__whisper completed ",
			"execute failed denied by the agent's permissions", "execute completed"}, "denied-da.txt", "allowed-da.txt")
		requests(t, script, 7, "")
		if len(ends) > 2 && !strings.Contains(ends[2], "REMOTE-MCP:through the gateway") {
			t.Errorf("the remote MCP tool's output: %q", ends[2])
		}
		for i, r := range script.Requests() {
			if want := map[bool]string{true: "scripted-small", false: s.Model.ID}[i == 1]; r.Model != want {
				t.Errorf("request %d went to model %q, want %q", i, r.Model, want)
			}
		}
	})

	t.Run("opencode", func(t *testing.T) {
		script := &agentllm.Script{Key: canary, Turns: []agentllm.Turn{
			{Calls: []agentllm.ToolCall{{Name: "task", Args: map[string]any{"description": "Review", "prompt": "Review the change.", "subagent_type": "reviewer"}}}},
			{Text: "reviewed: fine"}, // the sub-agent
			{Calls: []agentllm.ToolCall{{Name: "mcp1_shout", Args: map[string]any{"text": "hello mcp"}}}},
			{Calls: []agentllm.ToolCall{{Name: "remote_whisper", Args: map[string]any{"text": "Through The Gateway"}}}},
			{Calls: []agentllm.ToolCall{{Name: "bash", Args: map[string]any{"command": "touch denied-oc.txt", "description": "run"}}}},
			{Calls: []agentllm.ToolCall{{Name: "bash", Args: map[string]any{"command": "touch allowed-oc.txt", "description": "run"}}}},
			{Text: "done"},
		}}
		model.cur.Store(script)
		s := spec
		s.Permissions = []rayito.AgentPermission{{Tool: "bash", Pattern: "touch denied*", Allow: false}}
		s.RawConfig = json.RawMessage(`{"agent": {"build": {"prompt": "RAW-CONFIG-MARKER"}}}`)
		oc := rayito.WithAgentRuntime(rayito.AgentRuntimeOpenCode)
		ends := run(t, s, oc)
		check(t, ends, []string{"task completed ", "mcp1_shout completed MCP-SHOUT:HELLO MCP", "remote_whisper completed REMOTE-MCP:through the gateway", "bash failed ", "bash completed"},
			"denied-oc.txt", "allowed-oc.txt")
		if len(ends) > 0 && !strings.Contains(ends[0], "reviewed: fine") {
			t.Errorf("the sub-agent's answer: %q", ends[0])
		}
		requests(t, script, 7, "RAW-CONFIG-MARKER")
		s.RawConfig = json.RawMessage(`{"permission": {"bash": "allow"}}`)
		if _, err := sbx.Agent().Run(ctx, "x", rayito.WithAgentSpec(s), oc); !errors.Is(err, rayito.ErrInvalidArgument) || !strings.Contains(err.Error(), `"permission"`) {
			t.Errorf("a raw key Rayito sets: %v", err)
		}
	})
	// One whisper per runtime, each through the gateway with its key.
	if n := remote.Calls.Load(); n != 2 {
		t.Errorf("the remote MCP server's tool ran %d times, want 2", n)
	}
}
