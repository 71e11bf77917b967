// The router's status page: one constant, served as it is. Every figure is
// put into the page with textContent (worker ids come from discovery: never
// parsed as HTML).
#include "actors/router/frontend/status_page.hpp"

namespace outrider::router {

const char* status_page_html() {
  return R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>outrider router</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.2em 2em;color:#1b1f24;background:#fafbfc}
h1{font-size:20px;margin:0 0 .2em} h2{font-size:15px;margin:1.4em 0 .4em}
.muted{color:#667} .err{color:#b00020}
.cards{display:flex;gap:.8em;flex-wrap:wrap}
.card{background:#fff;border:1px solid #dde;border-radius:6px;padding:.5em .9em;min-width:8em}
.card b{display:block;font-size:20px}
table{border-collapse:collapse;background:#fff;min-width:40em}
th,td{border:1px solid #dde;padding:.25em .6em;text-align:right}
th{background:#f0f2f5} td:first-child,th:first-child{text-align:left}
.bar{display:inline-block;height:8px;background:#3b82f6;vertical-align:middle}
</style></head><body>
<h1>outrider router</h1>
<div class="muted">routing mode <span id="mode">?</span> &middot; refreshed every second &middot; <span id="updated">never</span> <span id="error" class="err"></span></div>
<h2>Last minute</h2>
<div class="cards">
<div class="card">requests<b id="total-requests">0</b></div>
<div class="card">in flight<b id="in-flight">0</b></div>
<div class="card">KV hit rate<b id="hit-rate">0%</b></div>
<div class="card">TTFT p50 / p99<b id="ttft">0 / 0 ms</b></div>
<div class="card">ITL p50 / p99<b id="itl">0 / 0 ms</b></div>
<div class="card">output tokens/s<b id="tps">0</b></div>
</div>
<h2>Workers</h2>
<table id="workers"><thead><tr><th>worker</th><th>role</th><th>rank</th>
<th>KV blocks held</th><th>KV in use (engine)</th><th>active prefill tokens</th><th>decode blocks</th>
<th>placed</th><th>requests (1 min)</th><th>hit rate</th><th>TTFT p50</th><th>ITL p50</th></tr></thead>
<tbody></tbody></table>
<h2>Recent routing decisions</h2>
<table id="decisions"><thead><tr><th>time</th><th>worker</th><th>rank</th>
<th>candidates</th><th>overlap / prompt blocks</th><th>best overlap on offer</th>
<th>queued tokens (chosen)</th><th>queued tokens (best overlap)</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const $ = id => document.getElementById(id);
const ms = v => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
const pct = v => (100 * v).toFixed(1) + "%";
function cell(tr, text) { const td = document.createElement("td"); td.textContent = String(text); tr.appendChild(td); return td; }
function fill(tbody, rows) {
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  for (const r of rows) { const tr = document.createElement("tr"); r(tr); tbody.appendChild(tr); }
}
function render(s) {
  $("mode").textContent = s.mode || "?";
  $("error").textContent = s.error || "";
  const all = (s.last_minute && s.last_minute.all) || {};
  const per = (s.last_minute && s.last_minute.workers) || {};
  $("total-requests").textContent = all.requests || 0;
  $("in-flight").textContent = s.in_flight || 0;
  $("hit-rate").textContent = pct(all.hit_rate || 0);
  $("ttft").textContent = ms(all.ttft_p50_ms || 0) + " / " + ms(all.ttft_p99_ms || 0) + " ms";
  $("itl").textContent = ms(all.itl_p50_ms || 0) + " / " + ms(all.itl_p99_ms || 0) + " ms";
  $("tps").textContent = (all.output_tokens_per_s || 0).toFixed(0);
  const most = Math.max(1, ...s.workers.flatMap(w => w.ranks.map(r => r.blocks_held)));
  const rows = [];
  for (const w of s.workers) for (const r of w.ranks) rows.push(tr => {
    const m = per[w.id] || {};
    cell(tr, w.id); cell(tr, w.role); cell(tr, r.rank);
    const held = cell(tr, r.blocks_held + " ");
    const bar = document.createElement("span"); bar.className = "bar";
    bar.style.width = (60 * r.blocks_held / most).toFixed(0) + "px"; held.appendChild(bar);
    cell(tr, r.engine_used_kv_blocks >= 0 ? r.engine_used_kv_blocks + " / " + r.engine_total_kv_blocks : "n/a");
    cell(tr, r.active_prefill_tokens); cell(tr, r.active_decode_blocks); cell(tr, r.placed);
    cell(tr, m.requests || 0); cell(tr, pct(m.hit_rate || 0));
    cell(tr, ms(m.ttft_p50_ms || 0) + " ms"); cell(tr, ms(m.itl_p50_ms || 0) + " ms");
  });
  fill($("workers").tBodies[0], rows);
  fill($("decisions").tBodies[0], s.decisions.slice(0, 20).map(d => tr => {
    cell(tr, new Date(d.at_ms).toLocaleTimeString()); cell(tr, d.worker); cell(tr, d.rank);
    cell(tr, d.candidates); cell(tr, d.overlap_blocks + " / " + d.prompt_blocks);
    cell(tr, d.best_overlap_blocks); cell(tr, d.queued_prefill_tokens); cell(tr, d.best_overlap_queued_tokens);
  }));
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}
async function tick() {
  try {
    const r = await fetch("/debug/status", {cache: "no-store"});
    render(await r.json());
  } catch (e) { $("error").textContent = "status unavailable: " + e; }
  setTimeout(tick, 1000);
}
tick();
</script></body></html>
)html";
}

} // namespace outrider::router
