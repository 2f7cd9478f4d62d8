// Rayito's Deep Agents runner: reads one JSON job on stdin, runs a Deep
// Agents agent (shell and file tools in the job's workdir) against an
// OpenAI-compatible model at the job's base URL (the sandbox's secret
// gateway: no key here, the gateway adds it), and prints one JSON event
// per line on stdout. Nothing else is printed: prompts, instructions and
// agent text reach only the events.

// Libraries must not print: console output would mix with the events (and
// could carry agent text into logs).
for (const k of ["log", "info", "warn", "error", "debug", "trace"]) console[k] = () => {};

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (p && p.type === "text" && typeof p.text === "string" ? p.text : "")).join("");
}

function reasoningOf(msg) {
  const r = msg.additional_kwargs && msg.additional_kwargs.reasoning_content;
  if (typeof r === "string") return r;
  if (Array.isArray(msg.content)) {
    return msg.content.map((p) => (p && (p.type === "reasoning" || p.type === "thinking") ? p.reasoning || p.thinking || "" : "")).join("");
  }
  return "";
}

// GATEWAY_KEY is not a key: the sandbox's gateway drops the client's copy
// of the provider's key header and adds the real one.
const GATEWAY_KEY = "rayito-gateway";

// withoutAuthorization is fetch without the Authorization header the
// OpenAI client always sends (Azure's key travels in api-key).
function withoutAuthorization(url, init) {
  const headers = new Headers(init && init.headers);
  headers.delete("authorization");
  return fetch(url, { ...init, headers });
}

// chatModel builds the LangChain chat model of a job's model entry
// ({provider, id, base_url, region}): base_url is the gateway route's URL
// (with the OpenAI base path for openai and openai-compatible).
async function chatModel(m) {
  switch (m.provider) {
    case "anthropic": {
      const { ChatAnthropic } = await import("@langchain/anthropic");
      return new ChatAnthropic({ model: m.id, apiKey: GATEWAY_KEY, anthropicApiUrl: m.base_url, streaming: true, maxRetries: 0 });
    }
    case "google": {
      const { ChatGoogleGenerativeAI } = await import("@langchain/google-genai");
      return new ChatGoogleGenerativeAI({ model: m.id, apiKey: GATEWAY_KEY, baseUrl: m.base_url, apiVersion: "v1beta", streaming: true, maxRetries: 0 });
    }
    case "bedrock": {
      const [{ ChatBedrockConverse }, { BedrockRuntimeClient }, { NodeHttpHandler }] = await Promise.all([
        import("@langchain/aws"),
        import("@aws-sdk/client-bedrock-runtime"),
        import("@smithy/node-http-handler"),
      ]);
      // A Bedrock API key is a bearer token: no SigV4, no AWS credentials.
      // HTTP/1.1: the gateway's loopback route is plain HTTP (the client's
      // default HTTP/2 handler would speak h2c).
      const client = new BedrockRuntimeClient({
        region: m.region,
        endpoint: m.base_url,
        requestHandler: new NodeHttpHandler(),
        authSchemePreference: ["httpBearerAuth"],
        token: async () => ({ token: GATEWAY_KEY }),
        maxAttempts: 1,
      });
      return new ChatBedrockConverse({ model: m.id, region: m.region, client, bedrockBearerToken: GATEWAY_KEY, streaming: true, maxRetries: 0 });
    }
    case "azure": {
      // Azure OpenAI's v1 API (/openai/v1/chat/completions, the deployment
      // as the model): its key travels in api-key, and no Authorization.
      const { ChatOpenAI } = await import("@langchain/openai");
      return new ChatOpenAI({
        model: m.id,
        apiKey: GATEWAY_KEY,
        configuration: { baseURL: m.base_url + "/openai/v1", defaultHeaders: { "api-key": GATEWAY_KEY }, fetch: withoutAuthorization },
        streaming: true,
        streamUsage: true,
        maxRetries: 0,
      });
    }
    default: {
      const { ChatOpenAI } = await import("@langchain/openai");
      return new ChatOpenAI({
        model: m.id,
        apiKey: GATEWAY_KEY,
        configuration: { baseURL: m.base_url },
        streaming: true,
        streamUsage: true,
        maxRetries: 0,
      });
    }
  }
}

// applyModelParams sets the job's model call parameters (AgentSpec.RawConfig
// under Deep Agents: temperature, top_p, max_tokens) on the model client,
// read at each call: on its inner clients too, and on the constructor
// fields ChatOpenAI rebuilds itself from when tools are bound.
function applyModelParams(model, provider, p) {
  if (!p) return;
  const f = {};
  if (typeof p.temperature === "number") f.temperature = p.temperature;
  if (typeof p.top_p === "number") f.topP = p.top_p;
  if (typeof p.max_tokens === "number") f[provider === "google" ? "maxOutputTokens" : "maxTokens"] = p.max_tokens;
  for (const o of [model, model.completions, model.responses, model.fields]) {
    if (o && typeof o === "object") Object.assign(o, f);
  }
}

// globRegExp is a permission pattern as a regular expression: * any run
// of characters, ? one, the rest literal (OpenCode's wildcard).
function globRegExp(pattern) {
  const re = pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[\\s\\S]*").replace(/\?/g, "[\\s\\S]");
  return new RegExp("^" + re + "$");
}

// subjectOf is what a permission pattern is matched against: the command
// of execute, the path of the file tools, else nothing.
function subjectOf(tc) {
  const a = (tc && tc.args) || {};
  for (const k of ["command", "file_path", "path"]) {
    if (typeof a[k] === "string") return a[k];
  }
  return "";
}

// permitted applies the job's permissions to a tool call: every tool is
// allowed unless an entry says otherwise, a later entry winning.
function permitted(list, tc) {
  let ok = true;
  const subject = subjectOf(tc);
  for (const p of list) {
    if (p.tool !== tc.name) continue;
    if (p.pattern && !globRegExp(p.pattern).test(subject)) continue;
    ok = !!p.allow;
  }
  return ok;
}

// permissionsMiddleware answers a denied tool call "denied by the agent's
// permissions" (a failed tool result the model sees) instead of running
// it: a preference, not a boundary (the sandbox is).
function permissionsMiddleware(createMiddleware, ToolMessage, list) {
  return createMiddleware({
    name: "RayitoPermissions",
    wrapToolCall: async (request, handler) => {
      const tc = request.toolCall;
      if (permitted(list, tc)) return handler(request);
      return new ToolMessage({ content: "denied by the agent's permissions", tool_call_id: tc.id || "", name: tc.name, status: "error" });
    },
  });
}

// mcpClient connects the job's MCP servers (a command in the sandbox on
// stdio, or a gateway route's URL on streamable HTTP) and returns the
// client and its tools, named SERVER__TOOL.
async function mcpClient(job) {
  const { MultiServerMCPClient } = await import("@langchain/mcp-adapters");
  const servers = {};
  for (const s of job.mcp_servers) {
    servers[s.name] = s.command
      ? { transport: "stdio", command: s.command[0], args: s.command.slice(1), cwd: job.workdir, env: { ...process.env }, stderr: "ignore" }
      : { transport: "http", url: s.url, automaticSSEFallback: false };
  }
  const client = new MultiServerMCPClient({
    mcpServers: servers,
    prefixToolNameWithServerName: true,
    throwOnLoadError: true,
    onConnectionError: "throw",
  });
  return { client, tools: await client.getTools() };
}

function isModelError(e) {
  const s = e && (e.status || (e.response && e.response.status));
  return typeof s === "number" || (e && /APIConnectionError|APIError|RateLimit|Authentication/.test(e.name || e.constructor?.name || ""));
}

async function main() {
  let job;
  try {
    job = await readJob();
  } catch {
    return fail("runtime_failed", 2);
  }
  if (!lock()) return fail("busy", 3);
  process.on("exit", unlock);
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
    process.on(sig, () => {
      unlock();
      process.exit(128 + 15);
    });
  }
  let mods;
  try {
    mods = await import("deepagents");
  } catch {
    return fail("runtime_missing", 4);
  }
  const { createDeepAgent, LocalShellBackend } = mods;
  let model;
  try {
    model = await chatModel(job.model);
  } catch (e) {
    return fail(e && e.code === "ERR_MODULE_NOT_FOUND" ? "runtime_missing" : "runtime_failed", 4);
  }
  // The small model, when the spec has one, is the sub-agents'.
  let small = null;
  if (job.small_model) {
    try {
      small = await chatModel(job.small_model);
    } catch {
      return fail("runtime_failed", 4);
    }
  }
  const backend = new LocalShellBackend({
    rootDir: job.workdir,
    inheritEnv: true,
    timeout: job.tool_timeout_seconds || 120,
    maxOutputBytes: job.tool_output_bytes || 100000,
  });
  applyModelParams(model, job.model.provider, job.model_params);
  let mcp = null;
  let tools = [];
  if (job.mcp_servers && job.mcp_servers.length > 0) {
    try {
      ({ client: mcp, tools } = await mcpClient(job));
    } catch (e) {
      return fail(e && e.code === "ERR_MODULE_NOT_FOUND" ? "runtime_missing" : "runtime_failed", 4);
    }
  }
  const closeMCP = async () => {
    if (mcp) await mcp.close().catch(() => {});
    mcp = null;
  };
  let middleware = [];
  if (job.permissions_deepagents && job.permissions && job.permissions.length > 0) {
    const { createMiddleware, ToolMessage } = await import("langchain");
    middleware = [permissionsMiddleware(createMiddleware, ToolMessage, job.permissions)];
  }
  // Sub-agents get the main agent's tools (MCP ones included) and its permissions.
  const subagents = (job.subagents || []).map((s) => ({
    name: s.name,
    description: s.description,
    systemPrompt: s.instructions,
    middleware,
    ...(small ? { model: small } : {}),
  }));
  const agent = createDeepAgent({
    model,
    backend,
    systemPrompt: job.instructions || undefined,
    tools,
    middleware,
    subagents,
  });
  let step = 0;
  let inStep = false;
  let finalText = "";
  const usage = { input_tokens: 0, output_tokens: 0 };
  const startStep = () => {
    if (!inStep) {
      step++;
      inStep = true;
      emit({ type: "step_started", step });
    }
  };
  try {
    const stream = await agent.stream(
      { messages: [{ role: "user", content: job.task }] },
      { streamMode: ["messages", "updates"], recursionLimit: 2 * (job.max_steps || 50) + 10 },
    );
    for await (const [mode, chunk] of stream) {
      if (mode === "messages") {
        const [msg, meta] = chunk;
        if (!meta || meta.langgraph_node !== "model_request") continue;
        const t = textOf(msg.content);
        if (t) {
          startStep();
          emit({ type: "text_delta", step, text: t });
        }
        continue;
      }
      for (const [node, update] of Object.entries(chunk || {})) {
        const msgs = (update && update.messages) || [];
        for (const msg of msgs) {
          const kind = typeof msg._getType === "function" ? msg._getType() : msg.type;
          if (node === "model_request" && kind === "ai") {
            startStep();
            const r = reasoningOf(msg);
            if (r) emit({ type: "reasoning", step, text: r });
            const t = textOf(msg.content);
            if (t) {
              emit({ type: "text", step, text: t });
              finalText = t;
            }
            for (const tc of msg.tool_calls || []) {
              emit({ type: "tool_call", step, id: tc.id || "", name: tc.name, input: tc.args || {}, status: "started" });
            }
            const u = msg.usage_metadata || {};
            const su = { input_tokens: u.input_tokens || 0, output_tokens: u.output_tokens || 0 };
            usage.input_tokens += su.input_tokens;
            usage.output_tokens += su.output_tokens;
            emit({ type: "step_finished", step, usage: su, tool_calls: (msg.tool_calls || []).length });
            inStep = false;
          } else if (kind === "tool") {
            const content = textOf(msg.content);
            emit({
              type: "tool_call",
              step,
              id: msg.tool_call_id || "",
              name: msg.name || "",
              status: msg.status === "error" ? "failed" : "completed",
              output: content.length > 4096 ? content.slice(0, 4096) : content,
            });
          }
        }
      }
    }
  } catch (e) {
    await closeMCP();
    if (e && e.name === "GraphRecursionError") return fail("max_steps", 5);
    return fail(isModelError(e) ? "model_error" : "runtime_failed", 6);
  }
  await closeMCP();
  emit({ type: "done", text: finalText, steps: step, usage });
}

main().catch(() => fail("runtime_failed", 7));
