// Package agenthost is the Rayito agent host: the process that runs a
// user's agent (any language, as a supervised child) behind the runtime
// contract of its target — AgentCore's HTTP invocation and ping endpoints,
// or a Rayito MicroVM reached through the sandbox's endpoint with a
// service token — and gives it its secrets as environment variables by
// the rules of the security model (T38): names only in the project, the
// plan and the image; values fetched at start; reserved names refused;
// values never logged.
//
// The binary is cmd/rayito-agent-host. Package secretenv holds the
// secret-env rules the CLI's plan and the host both apply; package
// project reads an agent project (rayito-agent.toml).
package agenthost

// ServiceTokenVariable carries the service token to the host on MicroVMs
// (the caller that starts the host sets it; invocations carry the token as
// Authorization: Bearer). The host removes it from its environment and
// never passes it to the agent. It is never set on AgentCore, whose
// invocations AWS signs.
const ServiceTokenVariable = "RAYITO_AGENT_SERVICE_TOKEN"
