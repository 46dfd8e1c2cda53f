package admin

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// pageScript is the page's only script: it fills the tenant list from
// /admin/tenants, then lists the chosen tenant's gates from /admin/gates
// every 2 s. Every value goes into the page as text (textContent), never
// as markup.
const pageScript = `
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let tenant = params.get("tenant") || "";
let state = params.get("state") || "";
let timer = 0;

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}

function when(t) {
  if (!t) return "";
  const left = Math.max(0, Math.round((Date.parse(t) - Date.now()) / 1000));
  return t + " (in " + left + " s)";
}

async function getJSON(path) {
  const r = await fetch(path, {credentials: "same-origin", cache: "no-store"});
  const body = await r.json().catch(() => ({error: "HTTP " + r.status}));
  if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
  return body;
}

async function loadTenants() {
  const sel = $("tenant");
  const body = await getJSON("/admin/tenants");
  sel.textContent = "";
  for (const id of body.tenants) {
    const o = document.createElement("option");
    o.value = id;
    o.textContent = id;
    sel.appendChild(o);
  }
  if (!tenant && body.tenants.length) tenant = body.tenants[0];
  sel.value = tenant;
  $("state").value = state;
}

async function refresh() {
  clearTimeout(timer);
  if (!tenant) { $("status").textContent = "no tenant"; return; }
  try {
    let q = "tenant=" + encodeURIComponent(tenant) + "&page_size=1000";
    if (state) q += "&state=" + encodeURIComponent(state);
    const body = await getJSON("/admin/gates?" + q);
    const rows = $("gates");
    rows.textContent = "";
    for (const g of body.gates) {
      const tr = document.createElement("tr");
      tr.className = g.states.join(" ");
      cell(tr, g.scope);
      cell(tr, g.credential ? "credential " + g.credential : (g.per_caller_credential ? "per caller credential" : ""));
      cell(tr, g.states.join(", "), "states");
      cell(tr, when(g.closed_until));
      cell(tr, when(g.breaker_open_until));
      cell(tr, String(g.in_flight));
      cell(tr, g.announced_quota ? g.announced_quota.remaining + " until " + g.announced_quota.reset : "");
      cell(tr, g.learning && g.learning.learned_quota !== undefined ? String(g.learning.learned_quota) : (g.learning ? "not learned yet" : ""));
      cell(tr, g.probe_in_flight ? "yes" : "");
      rows.appendChild(tr);
    }
    $("count").textContent = body.gates.length + " gate(s)" + (body.next_page_token ? ", more than shown (see /admin/gates paging)" : "");
    $("status").textContent = "updated " + new Date().toISOString();
    $("status").className = "";
  } catch (e) {
    $("status").textContent = "error: " + e.message;
    $("status").className = "error";
  }
  timer = setTimeout(refresh, 2000);
}

function choose() {
  tenant = $("tenant").value;
  state = $("state").value;
  const p = new URLSearchParams();
  p.set("tenant", tenant);
  if (state) p.set("state", state);
  history.replaceState(null, "", "?" + p.toString());
  refresh();
}

document.addEventListener("DOMContentLoaded", async () => {
  $("tenant").addEventListener("change", choose);
  $("state").addEventListener("change", choose);
  try { await loadTenants(); } catch (e) { $("status").textContent = "error: " + e.message; }
  refresh();
});
`

// pageStyle is the page's only style sheet.
const pageStyle = `
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .6em; }
table { border-collapse: collapse; width: 100%; margin-top: .8em; }
th, td { border-bottom: 1px solid #ddd; padding: .35em .6em; text-align: left; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
tr.closed td.states { color: #b00020; font-weight: bold; }
tr.breaker_open td.states { color: #a05a00; font-weight: bold; }
#status.error { color: #b00020; }
.bar { display: flex; gap: 1em; align-items: center; }
.muted { color: #666; }
`

// pageHTML is the page; the script and style are inlined, allowed by
// their hashes in the Content-Security-Policy.
const pageHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>retrybroker admin: live gates</title>
<style>` + pageStyle + `</style>
</head>
<body>
<h1>retrybroker: live gates</h1>
<div class="bar">
<label>tenant <select id="tenant"></select></label>
<label>state <select id="state">
<option value="">any</option>
<option value="closed">closed</option>
<option value="breaker_open">breaker open</option>
<option value="learning">learning</option>
</select></label>
<span id="count" class="muted"></span>
<span id="status" class="muted">loading</span>
</div>
<table>
<thead><tr><th>scope</th><th>credential</th><th>states</th><th>closed until</th><th>breaker open until</th><th>in flight</th><th>announced quota</th><th>learned quota</th><th>probe out</th></tr></thead>
<tbody id="gates"></tbody>
</table>
<p class="muted">Refreshes every 2 s. JSON: /admin/gates, /admin/gate, /admin/catalog, /admin/tenants. Profiles: /debug/pprof/.</p>
<script>` + pageScript + `</script>
</body>
</html>
`

// pageAssets is the page and its Content-Security-Policy.
type pageAssets struct {
	html []byte
	csp  string
}

func newPageAssets() pageAssets {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := strings.Join([]string{
		"default-src 'none'",
		"script-src " + hash(pageScript),
		"style-src " + hash(pageStyle),
		"connect-src 'self'",
		"img-src 'none'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
	return pageAssets{html: []byte(pageHTML), csp: csp}
}

// servePage serves the HTML page at exactly PagePath.
func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != PagePath {
		writeError(w, http.StatusNotFound, "no such admin path: see "+PagePath)
		return
	}
	if _, err := parseQuery(r.URL.RawQuery, "tenant", "state"); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Security-Policy", h.page.csp)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(h.page.html)
}
