// The Rayito dashboard page. Every value from the API is written with
// textContent or setAttribute on elements built here: nothing is ever
// parsed as HTML.

const state = { csrf: "", actions: false, selected: "", session: null, account: "default" };

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function showError(code, message) {
  const p = $("error");
  if (!code) { p.hidden = true; p.textContent = ""; return; }
  p.textContent = code + ": " + message;
  p.hidden = false;
}

// withAccount names the chosen account (other accounts are read-only,
// known by their label only).
function withAccount(path) {
  if (state.account === "default") return path;
  return path + (path.includes("?") ? "&" : "?") + "account=" + encodeURIComponent(state.account);
}

async function api(path, options) {
  const resp = await fetch(withAccount(path), Object.assign({ credentials: "same-origin", cache: "no-store" }, options || {}));
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) {
    const err = (body && body.error) || { code: "http_" + resp.status, message: "request failed" };
    const e = new Error(err.message);
    e.code = err.code;
    throw e;
  }
  return body;
}

function post(path, payload) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Rayito-CSRF": state.csrf },
    body: JSON.stringify(payload),
  });
}

function age(seconds) {
  if (seconds < 60) return seconds + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function bytes(n) {
  if (!n) return "-";
  return (n / (1 << 20)).toFixed(0) + " MiB";
}

const SVGNS = "http://www.w3.org/2000/svg";

function sparkline(values, maxValue) {
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 90 22");
  if (!values.length) return svg;
  const top = maxValue || Math.max(...values, 1);
  const step = values.length > 1 ? 90 / (values.length - 1) : 0;
  const pts = values.map((v, i) => (i * step).toFixed(1) + "," + (21 - (Math.min(v, top) / top) * 20).toFixed(1));
  const line = document.createElementNS(SVGNS, "polyline");
  line.setAttribute("points", pts.join(" "));
  svg.appendChild(line);
  return svg;
}

function actionsHere() {
  return state.actions && state.account === "default";
}

function checkedIDs() {
  return Array.from(document.querySelectorAll("#sandboxes tbody input[type=checkbox]:checked")).map((c) => c.value);
}

function renderSandboxes(list) {
  const keep = new Set(checkedIDs());
  const tbody = $("sandboxes").querySelector("tbody");
  tbody.replaceChildren();
  $("count").textContent = "(" + list.length + ")";
  for (const s of list) {
    const tr = document.createElement("tr");
    tr.dataset.id = s.id;
    if (s.id === state.selected) tr.classList.add("selected");
    const pick = el("td");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = s.id;
    box.checked = keep.has(s.id);
    box.hidden = !actionsHere();
    box.addEventListener("click", (ev) => ev.stopPropagation());
    pick.appendChild(box);
    tr.appendChild(pick);
    tr.appendChild(el("td", s.id, "id"));
    tr.appendChild(el("td", s.state));
    tr.appendChild(el("td", s.template));
    tr.appendChild(el("td", s.started_at ? age(s.age_seconds) : "-"));
    const md = el("td");
    md.className = "metadata";
    for (const [k, v] of Object.entries(s.metadata || {})) md.appendChild(el("span", k + "=" + v, "md"));
    tr.appendChild(md);
    const m = s.metrics || [];
    const cpu = el("td");
    cpu.appendChild(sparkline(m.map((x) => x.cpu), 100));
    if (m.length) cpu.appendChild(el("span", m[m.length - 1].cpu.toFixed(0) + "%", "muted"));
    tr.appendChild(cpu);
    const mem = el("td");
    mem.appendChild(sparkline(m.map((x) => x.mem_used), m.length ? m[m.length - 1].mem_total : 0));
    mem.appendChild(el("span", bytes(s.memory_bytes), "muted"));
    tr.appendChild(mem);
    tr.addEventListener("click", () => select(s.id));
    tbody.appendChild(tr);
  }
}

async function refresh() {
  try {
    const data = await api("/api/v1/sandboxes");
    renderSandboxes(data.sandboxes);
    document.body.dataset.loaded = "1";
  } catch (e) {
    showError(e.code, e.message);
  }
  try {
    const cost = await api("/api/v1/cost");
    $("costtotal").textContent = "$" + cost.total_usd.toFixed(4) + " (" + cost.sandboxes.length + " sandboxes)";
    $("costbasis").textContent = cost.basis;
  } catch (e) {
    $("costtotal").textContent = e.code;
  }
  if (state.selected) loadDetail(state.selected);
}

async function loadDetail(id) {
  $("detail").hidden = false;
  $("detailid").textContent = id;
  const tbody = $("events").querySelector("tbody");
  try {
    const data = await api("/api/v1/events?sandbox=" + encodeURIComponent(id));
    tbody.replaceChildren();
    for (const e of data.events) {
      const tr = document.createElement("tr");
      tr.appendChild(el("td", new Date(e.occurred_at).toLocaleString()));
      tr.appendChild(el("td", e.type + (e.kill_reason ? " (" + e.kill_reason + ")" : "")));
      tr.appendChild(el("td", e.generation));
      tbody.appendChild(tr);
    }
    if (!data.events.length) {
      const tr = document.createElement("tr");
      tr.appendChild(el("td", "no events (sandboxes created with events on have them)", "muted"));
      tbody.appendChild(tr);
    }
  } catch (e) {
    tbody.replaceChildren();
    const tr = document.createElement("tr");
    tr.appendChild(el("td", e.code + ": " + e.message, "muted"));
    tbody.appendChild(tr);
  }
  try {
    const data = await api("/api/v1/sandboxes/" + encodeURIComponent(id) + "/logs");
    $("logs").textContent = (data.truncated ? "[earlier lines cut]\n" : "") + data.lines.join("\n");
  } catch (e) {
    $("logs").textContent = e.code + ": " + e.message;
  }
}

function select(id) {
  state.selected = id;
  for (const tr of document.querySelectorAll("#sandboxes tbody tr")) tr.classList.toggle("selected", tr.dataset.id === id);
  loadDetail(id);
}

async function act(action) {
  const ids = checkedIDs();
  const payload = { action: action, ids: ids, confirm: $("confirm").checked };
  if (action === "set_timeout") payload.timeout_seconds = Number($("timeout").value);
  const out = $("actionresult");
  out.textContent = "...";
  try {
    const data = await post("/api/v1/actions", payload);
    const failed = data.results.filter((r) => !r.ok);
    out.textContent = action + ": " + (data.results.length - failed.length) + " done" + (failed.length ? ", failed: " + failed.map((r) => r.id + " (" + r.error + ")").join(", ") : "");
    showError("");
    $("confirm").checked = false;
    refresh();
  } catch (e) {
    out.textContent = "refused: " + e.code;
    showError(e.code, e.message);
  }
}

async function billed() {
  const out = $("billedresult");
  const list = $("billedlist");
  out.textContent = "...";
  list.replaceChildren();
  try {
    const b = await api("/api/v1/cost?billed=true", { headers: { "X-Rayito-CSRF": state.csrf } });
    out.textContent = "$" + b.total_usd.toFixed(2) + " from " + b.start + " to " + b.end + (b.estimated ? " (estimated by AWS)" : "");
    for (const sc of b.services) list.appendChild(el("li", sc.service + ": $" + sc.usd.toFixed(2)));
    list.appendChild(el("li", b.basis, "muted"));
  } catch (e) {
    out.textContent = e.code + ": " + e.message;
  }
}

async function start() {
  try {
    state.session = await api("/api/v1/session");
  } catch (e) {
    showError(e.code, e.message);
    return;
  }
  const s = state.session;
  state.csrf = s.csrf;
  state.actions = s.actions;
  $("title").textContent = s.title;
  document.title = s.title;
  if (s.logo) { $("logo").src = "/logo.svg"; $("logo").hidden = false; }
  $("backend").textContent = s.backend === "aws" ? "AWS" : "local platform";
  $("mode").textContent = s.actions ? "actions allowed" : "read-only";
  $("actions").hidden = !s.actions;
  $("billed").hidden = !s.cost_explorer;
  $("kill").addEventListener("click", () => act("kill"));
  $("pause").addEventListener("click", () => act("pause"));
  $("resume").addEventListener("click", () => act("resume"));
  $("settimeout").addEventListener("click", () => act("set_timeout"));
  $("billedbtn").addEventListener("click", billed);
  if (s.accounts.length > 1) {
    for (const label of s.accounts) $("account").appendChild(el("option", label));
    $("accountpick").hidden = false;
    $("account").addEventListener("change", () => {
      state.account = $("account").value;
      state.selected = "";
      $("detail").hidden = true;
      $("actions").hidden = !actionsHere();
      $("billed").hidden = !(s.cost_explorer && state.account === "default");
      $("mode").textContent = actionsHere() ? "actions allowed" : "read-only";
      refresh();
    });
  }
  await refresh();
  setInterval(refresh, 5000);
}

start();
