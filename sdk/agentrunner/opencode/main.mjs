// Rayito's OpenCode runner: reads one JSON job on stdin, runs
// `opencode run --format json` non-interactively in the job's workdir
// against an OpenAI-compatible model at the job's base URL (the sandbox's
// secret gateway: no key here, the gateway adds it), and prints OpenCode's
// events mapped to Rayito's, one JSON object per line. Permissions are
// answered without asking; autoupdate, sharing, LSP and model-list
// downloads, default plugins and reading a workdir's .claude/ are off.
// Nothing else is printed.
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), "package", "bin", "opencode");

// permissions is OpenCode's permission configuration: edit and bash
// allowed, webfetch denied, then the job's entries in order (a tool's
// patterns after a "*" that keeps its previous action).
function permissions(list) {
  const perm = { edit: "allow", bash: "allow", webfetch: "deny" };
  for (const p of list || []) {
    const action = p.allow ? "allow" : "deny";
    if (p.pattern) {
      if (typeof perm[p.tool] !== "object" || perm[p.tool] === null) perm[p.tool] = { "*": perm[p.tool] || "allow" };
      perm[p.tool][p.pattern] = action;
    } else {
      perm[p.tool] = action;
    }
  }
  return perm;
}

// providerConfig is OpenCode's provider entry of a job's model entry
// ({provider, id, base_url, region}; base_url is the gateway route's URL,
// with the OpenAI base path for openai and openai-compatible): one of
// OpenCode's bundled providers at the gateway, the model declared (model
// downloads are off). The key is not a key: the gateway drops the
// client's copy of the provider's key header and adds the real one.
function providerConfig(name, m) {
  const apiKey = "rayito-gateway";
  let npm = "@ai-sdk/openai-compatible";
  let options = { baseURL: m.base_url, apiKey };
  switch (m.provider) {
    case "anthropic":
      npm = "@ai-sdk/anthropic";
      options = { baseURL: m.base_url + "/v1", apiKey };
      break;
    case "google":
      npm = "@ai-sdk/google";
      options = { baseURL: m.base_url + "/v1beta", apiKey };
      break;
    case "azure":
      // Azure OpenAI's v1 API, chat completions (the deployment as the
      // model), key in api-key and no Authorization: the OpenAI-compatible
      // provider (the bundled @ai-sdk/azure answers a configured provider
      // with the Responses API only).
      options = { baseURL: m.base_url + "/openai/v1", headers: { "api-key": apiKey } };
      break;
    case "bedrock":
      // A Bedrock API key is a bearer token: no SigV4.
      npm = "@ai-sdk/amazon-bedrock";
      options = { baseURL: m.base_url, region: m.region, apiKey };
      break;
  }
  return { npm, name, options, models: { [m.id]: { name: m.id } } };
}

// providers is the configuration's providers: the model's, and the small
// model's when the job has one.
function providers(job) {
  const out = { rayito: providerConfig("rayito", job.model) };
  if (job.small_model) out["rayito-small"] = providerConfig("rayito-small", job.small_model);
  return out;
}

// subAgents is OpenCode's agent entries of the job's sub-agents (mode
// "subagent": the task tool's to call).
function subAgents(list) {
  const out = {};
  for (const s of list || []) out[s.name] = { description: s.description, prompt: s.instructions, mode: "subagent" };
  return out;
}

// mcpServers is OpenCode's mcp configuration of the job's servers: a
// command in the sandbox (local, stdio) or a gateway route's URL (remote,
// streamable HTTP, no OAuth).
function mcpServers(list) {
  const out = {};
  for (const s of list || []) {
    out[s.name] = s.command
      ? { type: "local", command: s.command, enabled: true }
      : { type: "remote", url: s.url, enabled: true, oauth: false };
  }
  return out;
}

async function main() {
  let job;
  try {
    job = await readJob();
  } catch {
    return fail("runtime_failed", 2);
  }
  if (!lock()) return fail("busy", 3);
  let tmp = "";
  let child = null;
  const cleanup = () => {
    unlock();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  };
  process.on("exit", cleanup);
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
    process.on(sig, () => {
      if (child) child.kill("SIGKILL");
      cleanup();
      process.exit(128 + 15);
    });
  }
  if (!fs.existsSync(BIN)) return fail("runtime_missing", 4);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "rayito-opencode-"));
  const id = job.model.id;
  // The raw configuration (AgentSpec.RawConfig, checked by the SDK) lies
  // under Rayito's keys; its agents beside the sub-agents.
  const raw = job.raw_config && typeof job.raw_config === "object" ? job.raw_config : {};
  const config = {
    ...raw,
    agent: { ...(raw.agent || {}), ...subAgents(job.subagents) },
    mcp: mcpServers(job.mcp_servers),
    autoupdate: false,
    share: "disabled",
    lsp: false,
    formatter: false,
    plugin: [],
    provider: providers(job),
    model: "rayito/" + id,
    small_model: job.small_model ? "rayito-small/" + job.small_model.id : "rayito/" + id,
    permission: permissions(job.permissions),
  };
  if (job.instructions) {
    const f = path.join(tmp, "instructions.md");
    fs.writeFileSync(f, job.instructions, { mode: 0o600 });
    config.instructions = [f];
  }
  const env = {
    ...process.env,
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    OPENCODE_DISABLE_CLAUDE_CODE: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    XDG_DATA_HOME: path.join(tmp, "data"),
    XDG_CACHE_HOME: path.join(tmp, "cache"),
    XDG_STATE_HOME: path.join(tmp, "state"),
  };
  // A fixed title spares the model a title request; with a small model,
  // OpenCode asks it for the title (its one side task in a run).
  const title = job.small_model ? [] : ["--title", "rayito"];
  child = spawn(BIN, ["run", "--format", "json", ...title, "--auto", "--dir", job.workdir, "--", job.task], {
    cwd: job.workdir,
    env,
    stdio: ["ignore", "pipe", "ignore"],
  });
  let step = 0;
  let lastText = "";
  let failed = "";
  const usage = { input_tokens: 0, output_tokens: 0 };
  const rl = readline.createInterface({ input: child.stdout, crlfDelay: Infinity });
  rl.on("line", (line) => {
    let ev;
    try {
      ev = JSON.parse(line);
    } catch {
      return;
    }
    const part = ev.part || {};
    switch (ev.type) {
      case "step_start":
        step++;
        emit({ type: "step_started", step });
        break;
      case "text":
        if (typeof part.text === "string" && part.text) {
          emit({ type: "text", step, text: part.text });
          lastText = part.text;
        }
        break;
      case "reasoning":
        if (typeof part.text === "string" && part.text) emit({ type: "reasoning", step, text: part.text });
        break;
      case "tool_use": {
        const st = part.state || {};
        emit({ type: "tool_call", step, id: part.callID || "", name: part.tool || "", input: st.input || {}, status: "started" });
        const output = typeof st.output === "string" ? st.output : typeof st.error === "string" ? st.error : "";
        emit({
          type: "tool_call",
          step,
          id: part.callID || "",
          name: part.tool || "",
          status: st.status === "error" ? "failed" : "completed",
          output: output.length > 4096 ? output.slice(0, 4096) : output,
        });
        break;
      }
      case "step_finish": {
        const t = part.tokens || {};
        const su = { input_tokens: t.input || 0, output_tokens: (t.output || 0) + (t.reasoning || 0) };
        usage.input_tokens += su.input_tokens;
        usage.output_tokens += su.output_tokens;
        emit({ type: "step_finished", step, usage: su });
        break;
      }
      case "error":
        failed = "model_error";
        break;
    }
  });
  const code = await new Promise((resolve) => {
    child.on("error", () => resolve(-1));
    child.on("close", (c) => resolve(c));
  });
  child = null;
  if (failed) return fail(failed, 6);
  if (code !== 0) return fail("runtime_failed", 6);
  emit({ type: "done", text: lastText, steps: step, usage });
}

main().catch(() => fail("runtime_failed", 7));
