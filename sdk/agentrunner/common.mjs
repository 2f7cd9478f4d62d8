// The part every Rayito agent runner shares (AgentTemplate installs each
// runner as this file followed by the runtime's own part): the event
// line writer, the sandbox's one-run lock and the job reader.
import fs from "node:fs";
import process from "node:process";

const LOCK = "/tmp/.rayito-agent.lock";

function emit(ev) {
  process.stdout.write(JSON.stringify(ev) + "\n");
}

function fail(reason, code) {
  emit({ type: "agent_failed", reason });
  process.exitCode = code;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

// lock takes the sandbox's one-run lock (O_EXCL); a lock whose process is
// gone is stale and taken over.
function lock() {
  for (let i = 0; i < 2; i++) {
    try {
      const fd = fs.openSync(LOCK, "wx", 0o600);
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      return true;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
      const pid = parseInt(fs.readFileSync(LOCK, "utf8"), 10);
      if (pid > 0 && alive(pid)) return false;
      try {
        fs.unlinkSync(LOCK);
      } catch {}
    }
  }
  return false;
}

function unlock() {
  try {
    if (parseInt(fs.readFileSync(LOCK, "utf8"), 10) === process.pid) fs.unlinkSync(LOCK);
  } catch {}
}

async function readJob() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

