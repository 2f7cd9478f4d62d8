package rayito

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/sdk/agentrunner"
)

// specSandbox is a sandbox with two gateway routes, model and mcp.
func specSandbox() *Agent {
	s := &Sandbox{}
	s.gateways.routes = map[string]uint16{"model": 4001, "mcp": 4002}
	return s.Agent()
}

var specModel = AgentModel{Provider: ProviderOpenAICompatible, ID: "m", Gateway: "model"}

// jobJSON prepares a run and returns its job as generic JSON.
func jobJSON(t *testing.T, opts ...AgentOption) map[string]any {
	t.Helper()
	_, job, err := specSandbox().prepare("task", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAgentSpecJob: sub-agents, MCP servers, raw configuration and Deep
// Agents' permissions reach the runner's job.
func TestAgentSpecJob(t *testing.T) {
	spec := AgentSpec{
		Model:       specModel,
		SubAgents:   []AgentSubAgent{{Name: "reviewer", Description: "Reviews.", Instructions: "Review it."}},
		MCPServers:  []AgentMCPServer{{Name: "local", Command: []string{"node", "srv.mjs"}}, {Name: "remote", Gateway: "mcp", Path: "/mcp"}},
		RawConfig:   json.RawMessage(`{"temperature": 0.5, "max_tokens": 100}`),
		Permissions: []AgentPermission{{Tool: "execute", Pattern: "rm *", Allow: false}},
	}
	m := jobJSON(t, WithAgentSpec(spec))
	b, _ := json.Marshal(map[string]any{"s": m["subagents"], "m": m["mcp_servers"], "p": m["model_params"], "d": m["permissions_deepagents"]})
	want := `{"d":true,"m":[{"command":["node","srv.mjs"],"name":"local"},{"name":"remote","url":"http://127.0.0.1:4002/mcp"}],"p":{"max_tokens":100,"temperature":0.5},"s":[{"description":"Reviews.","instructions":"Review it.","name":"reviewer"}]}`
	if string(b) != want {
		t.Errorf("deepagents job:\n%s\nwant\n%s", b, want)
	}
	if _, ok := m["raw_config"]; ok {
		t.Error("Deep Agents got the raw config")
	}
	// OpenCode: the raw object as given (compacted), no model params, its
	// own permissions.
	spec.RawConfig = json.RawMessage(`{ "agent": {"build": {"prompt": "x"}}, "experimental": {} }`)
	m = jobJSON(t, WithAgentSpec(spec), WithAgentRuntime(AgentRuntimeOpenCode))
	raw, _ := json.Marshal(m["raw_config"])
	if string(raw) != `{"agent":{"build":{"prompt":"x"}},"experimental":{}}` || m["model_params"] != nil || m["permissions_deepagents"] != nil {
		t.Errorf("opencode job: %v", m)
	}
}

// TestAgentSpecInvalid: every malformed sub-agent, MCP server and raw
// configuration is ErrInvalidArgument, and a refused raw key is named.
func TestAgentSpecInvalid(t *testing.T) {
	sub := func(s ...AgentSubAgent) AgentSpec { return AgentSpec{Model: specModel, SubAgents: s} }
	mcp := func(s ...AgentMCPServer) AgentSpec { return AgentSpec{Model: specModel, MCPServers: s} }
	raw := func(s string) AgentSpec { return AgentSpec{Model: specModel, RawConfig: json.RawMessage(s)} }
	ok := AgentSubAgent{Name: "a", Description: "d", Instructions: "i"}
	many := make([]AgentSubAgent, MaxAgentSubAgents+1)
	for i := range many {
		many[i] = AgentSubAgent{Name: "a" + strings.Repeat("b", i), Description: "d", Instructions: "i"}
	}
	manyMCP := make([]AgentMCPServer, MaxAgentMCPServers+1)
	for i := range manyMCP {
		manyMCP[i] = AgentMCPServer{Name: "m" + strings.Repeat("x", i), Command: []string{"x"}}
	}
	cases := map[string]struct {
		spec AgentSpec
		rt   AgentRuntime
	}{
		"sub-agent name":        {sub(AgentSubAgent{Name: "A", Description: "d", Instructions: "i"}), ""},
		"sub-agent name long":   {sub(AgentSubAgent{Name: strings.Repeat("a", 33), Description: "d", Instructions: "i"}), ""},
		"sub-agent twice":       {sub(ok, ok), ""},
		"sub-agent reserved":    {sub(AgentSubAgent{Name: "general-purpose", Description: "d", Instructions: "i"}), ""},
		"sub-agent reserved oc": {sub(AgentSubAgent{Name: "build", Description: "d", Instructions: "i"}), AgentRuntimeOpenCode},
		"sub-agent no desc":     {sub(AgentSubAgent{Name: "a", Instructions: "i"}), ""},
		"sub-agent no instr":    {sub(AgentSubAgent{Name: "a", Description: "d"}), ""},
		"sub-agent desc long":   {sub(AgentSubAgent{Name: "a", Description: strings.Repeat("d", 4097), Instructions: "i"}), ""},
		"sub-agents too many":   {sub(many...), ""},
		"sub-agent input":       {sub(AgentSubAgent{Name: "a", Description: "d", Instructions: strings.Repeat("i", MaxAgentInputBytes)}), ""},
		"mcp name":              {mcp(AgentMCPServer{Name: "M", Command: []string{"x"}}), ""},
		"mcp twice":             {mcp(AgentMCPServer{Name: "m", Command: []string{"x"}}, AgentMCPServer{Name: "m", Command: []string{"y"}}), ""},
		"mcp neither":           {mcp(AgentMCPServer{Name: "m"}), ""},
		"mcp both":              {mcp(AgentMCPServer{Name: "m", Command: []string{"x"}, Gateway: "mcp"}), ""},
		"mcp empty command":     {mcp(AgentMCPServer{Name: "m", Command: []string{""}}), ""},
		"mcp argv long":         {mcp(AgentMCPServer{Name: "m", Command: make([]string, 65)}), ""},
		"mcp arg long":          {mcp(AgentMCPServer{Name: "m", Command: []string{"x", strings.Repeat("a", 4097)}}), ""},
		"mcp arg nul":           {mcp(AgentMCPServer{Name: "m", Command: []string{"x", "a\x00"}}), ""},
		"mcp no route":          {mcp(AgentMCPServer{Name: "m", Gateway: "nope"}), AgentRuntimeOpenCode},
		"mcp path":              {mcp(AgentMCPServer{Name: "m", Gateway: "mcp", Path: "mcp?x"}), ""},
		"mcp too many":          {mcp(manyMCP...), ""},
		"raw not object":        {raw(`[1]`), AgentRuntimeOpenCode},
		"raw null":              {raw(`null`), AgentRuntimeOpenCode},
		"raw two":               {raw(`{} {}`), AgentRuntimeOpenCode},
		"raw bad":               {raw(`{`), ""},
		"raw big":               {raw(`{"x":"` + strings.Repeat("a", MaxAgentRawConfigBytes) + `"}`), AgentRuntimeOpenCode},
		"raw da key":            {raw(`{"model":"x"}`), ""},
		"raw da range":          {raw(`{"temperature":3}`), ""},
		"raw da tokens":         {raw(`{"max_tokens":1.5}`), ""},
		"raw da type":           {raw(`{"top_p":"1"}`), ""},
		"raw oc agent":          {raw(`{"agent":[]}`), AgentRuntimeOpenCode},
		"perm tool":             {AgentSpec{Model: specModel, Permissions: []AgentPermission{{Tool: "Execute"}}}, ""},
	}
	for name, c := range cases {
		opts := []AgentOption{WithAgentSpec(c.spec)}
		if c.rt != "" {
			opts = append(opts, WithAgentRuntime(c.rt))
		}
		if _, _, err := specSandbox().prepare("task", opts); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// OpenCode: each of Rayito's keys is refused by name, and a sub-agent
	// the raw config would redefine.
	for _, k := range OpenCodeEnforcedKeys() {
		_, _, err := specSandbox().prepare("task", []AgentOption{WithAgentRuntime(AgentRuntimeOpenCode), WithAgentSpec(raw(`{"` + k + `": false}`))})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+k+`"`) {
			t.Errorf("raw key %s: %v", k, err)
		}
	}
	sp := raw(`{"agent":{"a":{"prompt":"x"}}}`)
	sp.SubAgents = []AgentSubAgent{ok}
	if _, _, err := specSandbox().prepare("task", []AgentOption{WithAgentRuntime(AgentRuntimeOpenCode), WithAgentSpec(sp)}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), `"agent.a"`) {
		t.Errorf("raw agent over a sub-agent: %v", err)
	}
}

// FuzzAgentRawConfig: a raw configuration is accepted or refused with
// ErrInvalidArgument, never a panic; an accepted one under OpenCode is one
// JSON object without Rayito's keys, under Deep Agents only allowed keys.
func FuzzAgentRawConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"temperature":1}`, `{"agent":{"a":{}}}`, `{"model":"x"}`, `[]`, `{"a":1}{"b":2}`, `{"max_tokens":1e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, rt := range []AgentRuntime{AgentRuntimeOpenCode, AgentRuntimeDeepAgents} {
			out, params, err := checkAgentRawConfig(rt, raw, []string{"a"})
			if err != nil {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("%s: %v", rt, err)
				}
				continue
			}
			if rt == AgentRuntimeOpenCode {
				var m map[string]json.RawMessage
				if json.Unmarshal(out, &m) != nil || m == nil {
					t.Fatalf("not an object: %q", out)
				}
				for _, k := range OpenCodeEnforcedKeys() {
					if _, ok := m[k]; ok {
						t.Fatalf("enforced key %q passed", k)
					}
				}
				continue
			}
			for k := range params {
				if k != "temperature" && k != "top_p" && k != "max_tokens" {
					t.Fatalf("key %q passed", k)
				}
			}
		}
	})
}

// TestAgentInstallScriptArches: with per-machine pins the install script
// stops on another machine, and on each of its machines fetches, checks
// (sha256sum -c of that machine's lines) and unpacks only its packages.
func TestAgentInstallScriptArches(t *testing.T) {
	sum := func(c string) string { return strings.Repeat(c, 64) }
	pin := agentrunner.Runtime{Version: "1", NodeMinMajor: 20, Packages: []agentrunner.Package{
		{Name: "oc-x64", Version: "1", Tarball: "oc-x64-1.tgz", SHA256: sum("a"), Arch: "x86_64"},
		{Name: "oc-arm64", Version: "1", Tarball: "oc-arm64-1.tgz", SHA256: sum("b"), Arch: "aarch64"},
	}}
	s := installScript(AgentRuntimeOpenCode, "/opt/agents/opencode", pin)
	for _, want := range []string{
		`case "$arch" in aarch64|x86_64) ;; *) echo "the pinned opencode runs on aarch64, x86_64 only" >&2; exit 1;; esac`,
		"if [ \"$arch\" = aarch64 ]; then\n  cd \"$t\" && npm pack --silent oc-arm64@1 >/dev/null\n  printf '%s\\n' '" + sum("b") + "  oc-arm64-1.tgz' | sha256sum -c -\n  tar -xzf \"$t\"/oc-arm64-1.tgz -C /opt/agents/opencode --no-same-owner --no-same-permissions\nfi",
		"if [ \"$arch\" = x86_64 ]; then\n  cd \"$t\" && npm pack --silent oc-x64@1 >/dev/null\n  printf '%s\\n' '" + sum("a") + "  oc-x64-1.tgz' | sha256sum -c -\n  tar -xzf \"$t\"/oc-x64-1.tgz -C /opt/agents/opencode --no-same-owner --no-same-permissions\nfi",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("install script:\n%s\nlacks\n%s", s, want)
		}
	}
}
