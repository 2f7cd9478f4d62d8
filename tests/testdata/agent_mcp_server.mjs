// A tiny MCP server for the agent tests: MCP over stdio (one JSON-RPC
// message per line), no package: initialize, ping, tools/list and
// tools/call of one tool, "shout", which answers its text in capitals
// after a marker.
import readline from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
const tool = {
  name: "shout",
  description: "Returns the text in capitals.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return send({ id: null, error: { code: -32700, message: "parse error" } });
  }
  if (m.id === undefined || m.id === null) return; // a notification
  switch (m.method) {
    case "initialize":
      return send({
        id: m.id,
        result: {
          protocolVersion: (m.params && m.params.protocolVersion) || "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: "rayito-test-mcp", version: "1.0.0" },
        },
      });
    case "ping":
      return send({ id: m.id, result: {} });
    case "tools/list":
      return send({ id: m.id, result: { tools: [tool] } });
    case "tools/call": {
      const p = m.params || {};
      if (p.name !== "shout") return send({ id: m.id, error: { code: -32602, message: "unknown tool" } });
      const text = String((p.arguments && p.arguments.text) || "");
      return send({ id: m.id, result: { content: [{ type: "text", text: "MCP-SHOUT:" + text.toUpperCase() }], isError: false } });
    }
    default:
      return send({ id: m.id, error: { code: -32601, message: "method not found" } });
  }
});
