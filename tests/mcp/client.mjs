// Drives `rayito mcp` with the official MCP TypeScript SDK's client, for
// tests/mcp_test.go. Usage:
//   node client.mjs stdio   (RAYITO_BIN: the rayito binary; the
//                            environment reaches it: RAYITO_ENDPOINT, ...)
//   node client.mjs http    (MCP_URL, MCP_TOKEN: a running rayito mcp --http)
// It prints one JSON object of what it saw on stdout and exits 1 with
// the reason on stderr when a step fails.
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const want = ["create", "kill", "list_files", "list_sandboxes", "read_file", "run_code", "run_command", "write_file"];

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// call calls a tool and returns its structured result; a tool error throws.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: tool error: ${res.content.map((c) => c.text).join(" ")}`);
  return res.structuredContent;
}

// toolError calls a tool that must fail and returns its error text.
async function toolError(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  check(res.isError, `${name} ${JSON.stringify(args)} did not fail`);
  return res.content.map((c) => c.text).join(" ");
}

async function scenario(client, out) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(want), `tools: ${names}`);
  for (const t of tools) check(t.description && t.inputSchema?.type === "object", `tool ${t.name} has no description or schema`);
  out.tools = names;

  const created = await call(client, "create", { timeout_seconds: 600, envs: { GREETING: "hola" } });
  const id = created.sandbox_id;
  check(id, "create returned no sandbox_id");
  out.sandbox = id;

  const run = await call(client, "run_command", { sandbox_id: id, command: "echo $GREETING; echo err >&2; exit 4" });
  check(run.stdout === "hola\n" && run.stderr === "err\n" && run.exit_code === 4, `run_command: ${JSON.stringify(run)}`);

  const wrote = await call(client, "write_file", { sandbox_id: id, path: "notes/a.txt", content: "written by MCP\n" });
  check(wrote.path === "/home/user/notes/a.txt" && wrote.size === 15, `write_file: ${JSON.stringify(wrote)}`);
  const read = await call(client, "read_file", { sandbox_id: id, path: "/home/user/notes/a.txt" });
  check(read.content === "written by MCP\n" && read.encoding === "utf-8", `read_file: ${JSON.stringify(read)}`);
  const cat = await call(client, "run_command", { sandbox_id: id, command: "cat notes/a.txt" });
  check(cat.stdout === "written by MCP\n", `the file in the sandbox: ${JSON.stringify(cat)}`);
  const ls = await call(client, "list_files", { sandbox_id: id, path: "notes" });
  check(ls.entries.length === 1 && ls.entries[0].name === "a.txt", `list_files: ${JSON.stringify(ls)}`);

  if (process.env.MCP_KERNEL === "1") {
    const code = await call(client, "run_code", { sandbox_id: id, code: "import os\nprint('from python')\nsum(range(10))" });
    check(code.result === "45" && code.stdout === "from python\n", `run_code: ${JSON.stringify(code)}`);
    const raised = await call(client, "run_code", { sandbox_id: id, code: "1/0" });
    check(raised.error?.name === "ZeroDivisionError", `run_code that raises: ${JSON.stringify(raised)}`);
    out.run_code = true;
  }

  const big = await call(client, "run_command", { sandbox_id: id, command: "seq 1 40000" });
  check(big.stdout.length <= 100100 && /characters cut here/.test(big.stdout) && /characters of output were cut/.test(big.note), `a long output was not cut: ${big.stdout.length} ${big.note}`);

  // Another sandbox, left for the server's cleanup.
  const second = await call(client, "create", {});
  out.left = second.sandbox_id;
  const list = await call(client, "list_sandboxes", {});
  const ids = list.sandboxes.filter((s) => s.own).map((s) => s.sandbox_id).sort();
  check(JSON.stringify(ids) === JSON.stringify([id, second.sandbox_id].sort()), `list_sandboxes: ${JSON.stringify(list)}`);

  const killed = await call(client, "kill", { sandbox_id: id });
  check(killed.killed === id, `kill: ${JSON.stringify(killed)}`);
  out.kill_then_run = await toolError(client, "run_command", { sandbox_id: id, command: "true" });
  out.bad_id = await toolError(client, "run_command", { sandbox_id: "../etc", command: "true" });
}

// raw sends one MCP initialize with these headers and returns the status.
function raw(url, headers) {
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function main() {
  const mode = process.argv[2];
  const out = { mode };
  const client = new Client({ name: "rayito-mcp-test", version: "1.0.0" });
  if (mode === "stdio") {
    const transport = new StdioClientTransport({ command: process.env.RAYITO_BIN, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
    await client.connect(transport);
    await scenario(client, out);
    await client.close();
  } else if (mode === "http") {
    const url = new URL(process.env.MCP_URL);
    const token = process.env.MCP_TOKEN;
    const auth = { authorization: `Bearer ${token}` };
    out.no_token = await raw(url, {});
    out.wrong_token = await raw(url, { authorization: "Bearer " + "0".repeat(64) });
    out.foreign_host = await raw(url, { ...auth, host: `rebind.example:${url.port}` });
    out.foreign_origin = await raw(url, { ...auth, origin: "https://evil.example" });
    out.own_origin = await raw(url, { ...auth, origin: url.origin });
    // The SDK's client without the token fails to connect.
    try {
      await new Client({ name: "no-token", version: "1" }).connect(new StreamableHTTPClientTransport(url));
      out.sdk_without_token = "connected";
    } catch (e) {
      out.sdk_without_token = String(e.message || e).slice(0, 200);
    }
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: auth } });
    await client.connect(transport);
    await scenario(client, out);
    await client.close();
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`client: ${e.stack || e}\n`);
  process.exit(1);
});
