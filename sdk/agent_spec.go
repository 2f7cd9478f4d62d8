package rayito

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The bounds of an AgentSpec's sub-agents, MCP servers and raw
// configuration.
const (
	// MaxAgentSubAgents bounds AgentSpec.SubAgents.
	MaxAgentSubAgents = 16
	// MaxAgentMCPServers bounds AgentSpec.MCPServers.
	MaxAgentMCPServers = 8
	// MaxAgentRawConfigBytes bounds AgentSpec.RawConfig.
	MaxAgentRawConfigBytes = 64 << 10
	// maxAgentDescription bounds a sub-agent's description.
	maxAgentDescription = 4096
	// maxMCPArgs and maxMCPArg bound an MCP server's command.
	maxMCPArgs = 64
	maxMCPArg  = 4096
)

// OpenCodeEnforcedKeys are the keys of OpenCode's configuration that
// Rayito sets and AgentSpec.RawConfig may not: a raw configuration naming
// one is refused (ErrInvalidArgument naming the key).
func OpenCodeEnforcedKeys() []string { return slices.Clone(openCodeEnforcedKeys) }

var openCodeEnforcedKeys = []string{
	"autoupdate", "share", "autoshare", "plugin", "lsp", "formatter", "provider", "enabled_providers", "disabled_providers",
	"model", "small_model", "permission", "mcp", "instructions",
}

// DeepAgentsRawConfigKeys are the keys AgentSpec.RawConfig may hold under
// the Deep Agents runtime: model call parameters, given to the model
// client. temperature is 0–2, top_p 0–1, max_tokens 1–1 000 000.
func DeepAgentsRawConfigKeys() []string { return slices.Clone(deepAgentsRawConfigKeys) }

var deepAgentsRawConfigKeys = []string{"temperature", "top_p", "max_tokens"}

// agentJobSpec is the part of the runner's job that carries the spec's
// sub-agents, MCP servers and raw configuration.
type agentJobSpec struct {
	SubAgents  []agentJobSubAgent `json:"subagents,omitempty"`
	MCPServers []agentJobMCP      `json:"mcp_servers,omitempty"`
	// RawConfig is OpenCode's raw configuration (an object merged under
	// Rayito's keys).
	RawConfig json.RawMessage `json:"raw_config,omitempty"`
	// ModelParams are Deep Agents' model call parameters (from RawConfig).
	ModelParams map[string]float64 `json:"model_params,omitempty"`
	// PermissionsDeepAgents tells the Deep Agents runner to apply
	// Permissions (its tool wrapper).
	PermissionsDeepAgents bool `json:"permissions_deepagents,omitempty"`
}

// agentJobSubAgent is an AgentSubAgent on the wire.
type agentJobSubAgent struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Instructions string `json:"instructions"`
}

// agentJobMCP is an AgentMCPServer on the wire: a command, or the URL of
// its gateway route.
type agentJobMCP struct {
	Name    string   `json:"name"`
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
}

// validAgentName is [a-z][a-z0-9_-]{0,31}.
func validAgentName(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// prepareAgentSpec checks the spec's sub-agents, MCP servers and raw
// configuration for the runtime and returns their part of the job and
// the bytes the sub-agents add to the run's input (counted into
// MaxAgentInputBytes). gatewayURL returns a route's URL ("" when the
// sandbox has no such route).
func prepareAgentSpec(rt AgentRuntime, sp AgentSpec, gatewayURL func(string) string) (agentJobSpec, int, error) {
	var js agentJobSpec
	js.PermissionsDeepAgents = rt == AgentRuntimeDeepAgents && len(sp.Permissions) > 0
	if len(sp.SubAgents) > MaxAgentSubAgents {
		return js, 0, fmt.Errorf("%w: at most %d sub-agents", ErrInvalidArgument, MaxAgentSubAgents)
	}
	input := 0
	seen := map[string]bool{}
	for _, s := range sp.SubAgents {
		if !validAgentName(s.Name) {
			return js, 0, fmt.Errorf("%w: a sub-agent's name must match [a-z][a-z0-9_-]{0,31}", ErrInvalidArgument)
		}
		if seen[s.Name] || reservedSubAgent(rt, s.Name) {
			return js, 0, fmt.Errorf("%w: sub-agent %q named twice or reserved by the runtime", ErrInvalidArgument, s.Name)
		}
		seen[s.Name] = true
		if strings.TrimSpace(s.Description) == "" || len(s.Description) > maxAgentDescription || strings.TrimSpace(s.Instructions) == "" {
			return js, 0, fmt.Errorf("%w: sub-agent %q needs a description (at most %d bytes) and instructions", ErrInvalidArgument, s.Name, maxAgentDescription)
		}
		input += len(s.Name) + len(s.Description) + len(s.Instructions)
		js.SubAgents = append(js.SubAgents, agentJobSubAgent(s))
	}
	if len(sp.MCPServers) > MaxAgentMCPServers {
		return js, 0, fmt.Errorf("%w: at most %d MCP servers", ErrInvalidArgument, MaxAgentMCPServers)
	}
	seen = map[string]bool{}
	for _, m := range sp.MCPServers {
		if !validAgentName(m.Name) || seen[m.Name] {
			return js, 0, fmt.Errorf("%w: an MCP server needs a unique name matching [a-z][a-z0-9_-]{0,31}", ErrInvalidArgument)
		}
		seen[m.Name] = true
		switch {
		case len(m.Command) > 0 && m.Gateway == "":
			if len(m.Command) > maxMCPArgs || m.Command[0] == "" {
				return js, 0, fmt.Errorf("%w: MCP server %q: a command of 1 to %d arguments", ErrInvalidArgument, m.Name, maxMCPArgs)
			}
			for _, a := range m.Command {
				if len(a) > maxMCPArg || strings.ContainsRune(a, 0) {
					return js, 0, fmt.Errorf("%w: MCP server %q: an argument over %d bytes or with a NUL", ErrInvalidArgument, m.Name, maxMCPArg)
				}
				input += len(a)
			}
			js.MCPServers = append(js.MCPServers, agentJobMCP{Name: m.Name, Command: slices.Clone(m.Command)})
		case len(m.Command) == 0 && m.Gateway != "":
			u := gatewayURL(m.Gateway)
			if u == "" {
				return js, 0, fmt.Errorf("%w: MCP server %q: the sandbox has no gateway route %q", ErrInvalidArgument, m.Name, m.Gateway)
			}
			p := m.Path
			if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \x00") || len(p) > 1024) {
				return js, 0, fmt.Errorf("%w: MCP server %q: its path must start with / (no query)", ErrInvalidArgument, m.Name)
			}
			js.MCPServers = append(js.MCPServers, agentJobMCP{Name: m.Name, URL: u + p})
		default:
			return js, 0, fmt.Errorf("%w: MCP server %q needs either a command or a gateway route", ErrInvalidArgument, m.Name)
		}
	}
	if len(sp.RawConfig) > 0 {
		raw, params, err := checkAgentRawConfig(rt, sp.RawConfig, slices.Collect(maps.Keys(seenSubAgents(sp))))
		if err != nil {
			return js, 0, err
		}
		js.RawConfig, js.ModelParams = raw, params
	}
	return js, input, nil
}

// seenSubAgents is the set of the spec's sub-agent names.
func seenSubAgents(sp AgentSpec) map[string]bool {
	m := map[string]bool{}
	for _, s := range sp.SubAgents {
		m[s.Name] = true
	}
	return m
}

// reservedSubAgent: names the runtime already uses for its own agents.
func reservedSubAgent(rt AgentRuntime, name string) bool {
	switch rt {
	case AgentRuntimeOpenCode:
		return slices.Contains([]string{"build", "plan", "general", "explore", "compaction", "title", "summary"}, name)
	default:
		return name == "general-purpose"
	}
}

// checkAgentRawConfig checks a raw configuration (the caller's, bounded:
// at most MaxAgentRawConfigBytes, a JSON object) for the runtime. Under
// OpenCode it may hold any key but OpenCodeEnforcedKeys, and its "agent"
// object no entry named like a sub-agent; it is returned compacted. Under
// Deep Agents only DeepAgentsRawConfigKeys, numbers in their ranges,
// returned as model parameters.
func checkAgentRawConfig(rt AgentRuntime, raw []byte, subAgents []string) (json.RawMessage, map[string]float64, error) {
	if len(raw) > MaxAgentRawConfigBytes {
		return nil, nil, fmt.Errorf("%w: the raw config is over %d bytes", ErrInvalidArgument, MaxAgentRawConfigBytes)
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		return nil, nil, fmt.Errorf("%w: the raw config must be one JSON object", ErrInvalidArgument)
	}
	keys := slices.Sorted(maps.Keys(obj))
	switch rt {
	case AgentRuntimeOpenCode:
		for _, k := range keys {
			if slices.Contains(openCodeEnforcedKeys, k) {
				return nil, nil, fmt.Errorf("%w: the raw config may not set %q (Rayito sets it)", ErrInvalidArgument, k)
			}
		}
		if a, ok := obj["agent"]; ok {
			var agents map[string]json.RawMessage
			if json.Unmarshal(a, &agents) != nil {
				return nil, nil, fmt.Errorf("%w: the raw config's %q must be an object", ErrInvalidArgument, "agent")
			}
			for _, n := range subAgents {
				if _, ok := agents[n]; ok {
					return nil, nil, fmt.Errorf("%w: the raw config may not set %q (a sub-agent of the spec)", ErrInvalidArgument, "agent."+n)
				}
			}
		}
		var out bytes.Buffer
		if err := json.Compact(&out, raw); err != nil {
			return nil, nil, fmt.Errorf("%w: the raw config must be one JSON object", ErrInvalidArgument)
		}
		return out.Bytes(), nil, nil
	default:
		params := map[string]float64{}
		for _, k := range keys {
			var v float64
			if json.Unmarshal(obj[k], &v) != nil {
				return nil, nil, fmt.Errorf("%w: the raw config's %q must be a number", ErrInvalidArgument, k)
			}
			ok := false
			switch k {
			case "temperature":
				ok = v >= 0 && v <= 2
			case "top_p":
				ok = v >= 0 && v <= 1
			case "max_tokens":
				ok = v >= 1 && v <= 1_000_000 && v == math.Trunc(v)
			default:
				return nil, nil, fmt.Errorf("%w: the raw config may not set %q under Deep Agents (allowed: %s)", ErrInvalidArgument, k, strings.Join(deepAgentsRawConfigKeys, ", "))
			}
			if !ok {
				return nil, nil, fmt.Errorf("%w: the raw config's %q is out of range", ErrInvalidArgument, k)
			}
			params[k] = v
		}
		return nil, params, nil
	}
}
