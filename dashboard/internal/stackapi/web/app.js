// The dashboard stack's page. The access token lives in this module's
// memory only (never a cookie or storage); the PKCE verifier and state sit
// in sessionStorage between the Hosted UI redirect and the exchange. Every
// value from the API is written with textContent.
const $ = (id) => document.getElementById(id);
let token = null;
let cfg = null;

function status(msg) { $("status").textContent = msg; }

function b64url(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString() { return b64url(crypto.getRandomValues(new Uint8Array(32))); }

async function signIn() {
  const verifier = randomString();
  const state = randomString();
  sessionStorage.setItem("rayito.pkce", JSON.stringify({ verifier, state }));
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const u = new URL("https://" + cfg.hostedUiDomain + "/oauth2/authorize");
  u.searchParams.set("response_type", "code");
  u.searchParams.set("client_id", cfg.clientId);
  u.searchParams.set("redirect_uri", location.origin + "/");
  u.searchParams.set("scope", "openid");
  u.searchParams.set("code_challenge_method", "S256");
  u.searchParams.set("code_challenge", challenge);
  u.searchParams.set("state", state);
  location.assign(u.toString());
}

async function exchange(code, state) {
  const saved = JSON.parse(sessionStorage.getItem("rayito.pkce") || "null");
  sessionStorage.removeItem("rayito.pkce");
  history.replaceState(null, "", "/");
  if (!saved || saved.state !== state) { status("Sign-in state did not match: sign in again."); return; }
  const body = new URLSearchParams({ grant_type: "authorization_code", client_id: cfg.clientId, code, redirect_uri: location.origin + "/", code_verifier: saved.verifier });
  const r = await fetch("https://" + cfg.hostedUiDomain + "/oauth2/token", { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body, credentials: "omit" });
  if (!r.ok) { status("Sign-in failed: sign in again."); return; }
  const t = await r.json();
  token = t.access_token || null;
}

async function api(path, init = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + token }, init.headers || {});
  const r = await fetch(path, Object.assign({}, init, { headers, credentials: "omit" }));
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) { token = null; show(); }
  return { ok: r.ok, status: r.status, data };
}

function cell(tr, text) { const td = document.createElement("td"); td.textContent = text == null ? "" : String(text); tr.appendChild(td); }

async function refresh() {
  status("Loading...");
  const { ok, data } = await api("/api/v1/sandboxes");
  if (!ok) { status("Error: " + (data.code || "unknown")); return; }
  const rows = $("rows");
  rows.replaceChildren();
  for (const s of data.sandboxes || []) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    const cb = document.createElement("input");
    cb.type = "checkbox";
    cb.dataset.id = String(s.id);
    td.appendChild(cb);
    tr.appendChild(td);
    cell(tr, s.id); cell(tr, s.state); cell(tr, s.imageArn); cell(tr, s.startedAt);
    rows.appendChild(tr);
  }
  status((data.sandboxes || []).length + " sandboxes");
}

async function act() {
  const ids = [...document.querySelectorAll("#rows input:checked")].map((c) => c.dataset.id);
  const { ok, data } = await api("/api/v1/actions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ action: $("action").value, ids, confirm: $("confirm").checked }) });
  $("confirm").checked = false;
  if (!ok) { status("Refused: " + (data.code || "unknown")); return; }
  const failed = (data.results || []).filter((x) => !x.ok).length;
  status(data.action + ": " + ((data.results || []).length - failed) + " done, " + failed + " failed");
  refresh();
}

async function cost() {
  const q = new URLSearchParams({ from: $("from").value, to: $("to").value, region: $("region").value });
  const { ok, data } = await api("/api/v1/cost?" + q.toString());
  const out = $("costout");
  out.replaceChildren();
  if (!ok) { status("Refused: " + (data.code || "unknown")); return; }
  for (const m of data.months || []) {
    const li = document.createElement("li");
    li.textContent = m.month + ": " + m.amount + " " + m.unit;
    out.appendChild(li);
  }
}

function show() {
  const inside = token !== null;
  $("signin").hidden = inside;
  $("signout").hidden = !inside;
  $("list").hidden = !inside;
  $("actions").hidden = !(inside && cfg.allowActions);
  $("cost").hidden = !(inside && cfg.costExplorer);
  if (!inside) status("Sign in with your Cognito user.");
}

async function main() {
  cfg = await (await fetch("/config.json", { credentials: "omit" })).json();
  $("region").value = cfg.region || "";
  if (cfg.title) { document.title = cfg.title; $("title").textContent = cfg.title; }
  if (cfg.logo) { $("logo").src = "/logo.svg"; $("logo").hidden = false; }
  $("signin").addEventListener("click", signIn);
  $("signout").addEventListener("click", () => { token = null; show(); });
  $("refresh").addEventListener("click", refresh);
  $("act").addEventListener("click", act);
  $("costbtn").addEventListener("click", cost);
  const p = new URLSearchParams(location.search);
  if (p.get("code")) await exchange(p.get("code"), p.get("state") || "");
  if (token) {
    const me = await api("/api/v1/me");
    if (me.ok) {
      cfg.allowActions = me.data.allowActions === true;
      cfg.costExplorer = me.data.costExplorer === true;
      $("who").textContent = String(me.data.username || "");
    }
  }
  show();
  if (token) refresh();
}

main();
