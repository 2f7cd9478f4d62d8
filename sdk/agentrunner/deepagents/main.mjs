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
    const [da, oa] = await Promise.all([import("deepagents"), import("@langchain/openai")]);
    mods = { ...da, ...oa };
  } catch {
    return fail("runtime_missing", 4);
  }
  const { createDeepAgent, LocalShellBackend, ChatOpenAI } = mods;
  const model = new ChatOpenAI({
    model: job.model.id,
    apiKey: "rayito-gateway", // not a key: the gateway replaces it
    configuration: { baseURL: job.model.base_url },
    streaming: true,
    streamUsage: true,
    maxRetries: 0,
  });
  const backend = new LocalShellBackend({
    rootDir: job.workdir,
    inheritEnv: true,
    timeout: job.tool_timeout_seconds || 120,
    maxOutputBytes: job.tool_output_bytes || 100000,
  });
  const agent = createDeepAgent({ model, backend, systemPrompt: job.instructions || undefined });
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
    if (e && e.name === "GraphRecursionError") return fail("max_steps", 5);
    return fail(isModelError(e) ? "model_error" : "runtime_failed", 6);
  }
  emit({ type: "done", text: finalText, steps: step, usage });
}

main().catch(() => fail("runtime_failed", 7));
