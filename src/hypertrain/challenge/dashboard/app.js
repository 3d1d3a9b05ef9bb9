/* Hypertrain dashboard: polls the service's read-only JSON and redraws every panel.
   No framework, no build step, no network access beyond this service. All text is
   inserted with textContent, never as HTML. */
"use strict";

const POLL_MS = 2000;
const AUDIT_ROWS = 8;
const params = new URLSearchParams(window.location.search);
const API = new URL("../v1/", window.location.href);
const ui = { selected: null, curve: [], lastOk: null, runId: params.get("run") };

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v; // CSSOM, allowed by the page's CSP
    else node.setAttribute(k, v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const dash = "—";

function num(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return dash;
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits ?? 0 });
}
function bytes(n) {
  if (n === null || n === undefined) return dash;
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0, v = n;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
  return `${v.toLocaleString("en-US", { maximumFractionDigits: i ? 1 : 0 })} ${units[i]}`;
}
function secs(s) { return s === null || s === undefined ? dash : `${num(s, 0)} s`; }
function short(h) { return h ? `${h.slice(0, 6)}…${h.slice(-4)}` : dash; }
function badge(text, kind) { return el("span", { class: `badge ${kind || text}` }, text); }
function loss(x) { return x === null || x === undefined ? dash : Number(x).toFixed(4); }

async function getJSON(path) {
  const response = await fetch(new URL(path, API), { cache: "no-store" });
  if (!response.ok) {
    let detail = `${response.status}`;
    try { detail = (await response.json()).detail || detail; } catch (e) { /* not JSON */ }
    const err = new Error(detail); err.status = response.status; throw err;
  }
  return response.json();
}

function setConn(ok, text) {
  const c = $("conn");
  c.className = `conn ${ok ? "ok" : "err"}`;
  c.textContent = text;
}
function notice(text, kind) {
  const n = $("notice");
  if (!text) { n.hidden = true; n.textContent = ""; return; }
  n.hidden = false; n.className = `notice ${kind || ""}`; n.textContent = text;
}
function fillBody(table, rows, cols, emptyText) {
  const body = $(table).tBodies[0];
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: cols, class: "empty" }, emptyText))]));
}

function drawGlance(d) {
  const g = d.glance;
  const total = Number(params.get("rounds")) || null;
  const finished = total !== null && g.rounds_done >= total;
  const now = g.round === null || finished ? null : `now round ${g.round} (${g.phase})`;
  const measured = d.curve.filter((p) => p.heldout_loss !== null).length;
  const drop = measured > 1 ? `from ${loss(g.first_heldout_loss)} after round ${d.curve[0].round}` : null;
  const tiles = [
    ["Held-out loss", loss(g.heldout_loss), drop],
    ["Outer rounds done", `${num(g.rounds_done)}${total ? ` / ${total}` : ""}`, now],
    ["Islands taking part", num(g.islands), null],
    ["Throughput", num(g.tokens_per_s, 0), "tokens/s, all islands"],
    ["Bandwidth saved", g.honest && g.honest.honest_saved_factor ? `${num(g.honest.honest_saved_factor, 1)}×` : dash,
      "all traffic vs bf16 ring all-reduce"],
    ["Tokens trained", num(g.tokens), null],
    ["Audits / faults", `${num(g.audits)} / ${num(g.faults)}`, null],
    ["Run status", finished ? "finished" : g.status, g.beacon_round ? `beacon round ${g.beacon_round}` : null, "status"],
  ];
  $("glance-tiles").replaceChildren(...tiles.map(([k, v, sub, cls]) =>
    el("div", { class: cls ? `tile ${cls}` : "tile" }, el("dt", {}, k),
      el("dd", {}, v, sub ? el("small", {}, ` ${sub}`) : null))));
}

function drawModel(d) {
  const m = d.model;
  const row = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
  $("model-body").replaceChildren(el("dl", { class: "card" },
    el("h3", {}, `Architecture (${m.preset})`),
    row("Layers", num(m.layers)), row("d_model", num(m.d_model)), row("Heads", num(m.heads)),
    row("Context", `${num(m.context)} tokens`), row("Vocabulary", num(m.vocab)),
    row("Parameters", num(m.parameters)),
    m.moe ? row("Experts", `${m.moe.num_experts} (top ${m.moe.top_k})`) : [],
    el("h3", {}, "Optimizers"),
    row("Inner", `${m.inner.name}, lr ${m.inner.lr}, ${m.inner.steps_per_round} steps per round`),
    row("Outer", `${m.outer.name}, lr ${m.outer.lr}, momentum ${m.outer.momentum}`),
    row("Compression", `${m.compression.codec}, blocks of ${m.compression.block_size}`),
    row("Checkpoints", `every ${m.inner.checkpoint_interval} steps`)));
}

function drawCurve(d) {
  ui.curve = d.curve.filter((p) => p.heldout_loss !== null);
  const tbody = $("curve-table").tBodies[0];
  tbody.replaceChildren(...(d.curve.length ? d.curve.map((p) => el("tr", {},
    el("td", {}, p.round), el("td", {}, loss(p.heldout_loss)), el("td", {}, loss(p.train_loss))))
    : [el("tr", {}, el("td", { colspan: 3, class: "empty" }, "No rounds finished yet."))]));
  if (ui.selected === null || ui.selected >= ui.curve.length) ui.selected = ui.curve.length - 1;
  renderChart();
}

function renderChart() {
  const pts = ui.curve, box = $("chart");
  if (!pts.length) {
    box.replaceChildren(el("p", { class: "empty" }, "The curve appears after the first merged round."));
    $("chart-readout").textContent = "No rounds finished yet.";
    return;
  }
  const W = 600, H = 240, L = 52, R = 16, T = 14, B = 34;
  const ys = pts.map((p) => p.heldout_loss);
  let lo = Math.min(...ys), hi = Math.max(...ys);
  if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
  const pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
  const x = (i) => L + (pts.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (pts.length - 1));
  const y = (v) => T + ((hi - v) * (H - T - B)) / (hi - lo);
  const NS = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  };
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, "aria-hidden": "true", preserveAspectRatio: "none" });
  for (let k = 0; k <= 4; k += 1) {
    const v = lo + ((hi - lo) * k) / 4;
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s("text", { class: "tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
  }
  svg.append(s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  const step = Math.max(1, Math.ceil(pts.length / 10));
  pts.forEach((p, i) => {
    if (i % step === 0 || i === pts.length - 1) {
      svg.append(s("text", { class: "tick", x: x(i), y: H - B + 16, "text-anchor": "middle" }, `r${p.round}`));
    }
  });
  svg.append(s("text", { class: "tick", x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "outer round"));
  svg.append(s("polyline", { class: "line", points: pts.map((p, i) => `${x(i)},${y(p.heldout_loss)}`).join(" ") }));
  pts.forEach((p, i) => {
    const c = s("circle", { class: i === ui.selected ? "pt sel" : "pt", cx: x(i), cy: y(p.heldout_loss), r: i === ui.selected ? 6 : 4 });
    c.addEventListener("mouseenter", () => select(i));
    svg.append(c);
  });
  box.replaceChildren(svg);
  const p = pts[ui.selected];
  $("chart-readout").textContent =
    `Round ${p.round}: held-out loss ${loss(p.heldout_loss)} (${ui.selected + 1} of ${pts.length})`;
}

function select(i) {
  if (!ui.curve.length) return;
  ui.selected = Math.max(0, Math.min(ui.curve.length - 1, i));
  renderChart();
}

function drawIslands(d) {
  const cards = d.islands.map((isl, i) => el("article", { class: "island", "aria-label": `Island ${i + 1}` },
    el("h3", {}, `Island ${i + 1}`, badge(isl.status)),
    el("dl", {},
      el("dt", {}, "Miner"), el("dd", { class: "mono", title: isl.hotkey }, short(isl.hotkey)),
      el("dt", {}, "Devices"), el("dd", {}, `${isl.devices} × ${isl.device_class}`),
      el("dt", {}, "Throughput"), el("dd", {}, `${num(isl.tokens_per_s, 0)} tok/s`),
      el("dt", {}, "Inner steps"), el("dd", {},
        el("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": isl.steps_total,
          "aria-valuenow": isl.steps_done, "aria-label": `Island ${i + 1} inner steps this round` },
        el("span", { style: `width:${(100 * isl.steps_done) / Math.max(1, isl.steps_total)}%` })),
        `${isl.steps_done} / ${isl.steps_total} this round`),
      el("dt", {}, "Last sync"), el("dd", {}, isl.last_sync_round === null ? "not yet" : `round ${isl.last_sync_round}`),
      el("dt", {}, "Token share"), el("dd", {}, `${num(100 * isl.share, 1)} %`))));
  $("islands-body").replaceChildren(cards.length ? el("div", { class: "islands" }, cards)
    : el("p", { class: "empty" }, "No island has joined yet."));
}

function drawRoster(d) {
  fillBody("roster-table", d.islands.map((m, i) => el("tr", {},
    el("td", { class: "mono", title: m.hotkey }, short(m.hotkey)), el("td", {}, `Island ${i + 1}`),
    el("td", {}, badge(m.status)), el("td", { class: "num" }, num(m.rounds)),
    el("td", { class: "num" }, num(m.tokens)), el("td", { class: "num" }, num(m.tokens_per_s, 0)),
    el("td", { class: "num" }, `${num(100 * m.share, 1)} %`), el("td", { class: "num" }, num(m.escrow)),
    el("td", { class: "num" }, num(m.vested)), el("td", { class: "num" }, num(m.paid)),
    el("td", { class: "num" }, num(m.burned)))),
  11, "No miners yet.");
}

function drawRounds(d) {
  const rows = d.rounds.slice(-12).reverse().map((r) => el("tr", {},
    el("td", {}, r.round), el("td", {}, new Date(r.started_unix * 1000).toLocaleTimeString()),
    el("td", {}, r.phase), el("td", { class: "num" }, num(r.islands)),
    el("td", { class: "num" }, secs(r.compute_s)), el("td", { class: "num" }, secs(r.sync_s)),
    el("td", { class: "num" }, bytes(r.bytes_sent)), el("td", { class: "num" }, bytes(r.ddp_bytes)),
    el("td", { class: "num" }, r.saved_factor ? `${num(r.saved_factor, 1)}×` : dash),
    el("td", { class: "num" }, loss(r.eval_loss)),
    el("td", {}, `${r.audits} audited: ${r.verdicts.match} match, ${r.verdicts.mismatch} mismatch`,
      r.disputes ? `, ${r.disputes} disputed` : "")));
  fillBody("rounds-table", rows, 11, "No rounds yet.");
}

function drawAudits(d, runId) {
  const names = new Map(d.islands.map((m, i) => [m.hotkey, `Island ${i + 1}`]));
  const shown = d.audits.slice(0, AUDIT_ROWS); // newest first
  $("audits-more").textContent = d.audits.length > shown.length
    ? `Showing the ${shown.length} latest of ${d.audits.length} audits; all of them are in the JSON API.` : "";
  const rows = shown.map((a) => {
    const link = el("a", { href: new URL(`runs/${encodeURIComponent(runId)}/rounds/${a.round}`, API).href,
      title: a.beacon_randomness ? `randomness ${a.beacon_randomness}` : null }, `beacon #${a.beacon_round}`);
    const verdicts = a.verdicts.length ? a.verdicts.map((v) => el("div", {}, badge(v.result),
      v.first_bad_leaf !== null && v.first_bad_leaf !== undefined ? ` first bad leaf ${v.first_bad_leaf}` : "",
      v.detail ? ` ${v.detail}` : "")) : "pending";
    const outcome = a.fault ? badge("caught", "caught") : (a.verdicts.length ? badge("clean", "clean") : "waiting");
    return el("tr", {}, el("td", {}, a.round),
      el("td", { title: a.hotkey, class: "nowrap" }, `${names.get(a.hotkey) || short(a.hotkey)}${a.probation ? " (probation)" : ""}`),
      el("td", {}, link), el("td", {}, a.segments.join(", ") || dash), el("td", {}, verdicts),
      el("td", {}, a.disputes.length ? a.disputes.map((x) => `${x.status}: ${x.reason}`).join("; ") : "none"),
      el("td", {}, outcome, a.fault ? " no reward" : ""));
  });
  fillBody("audits-table", rows, 7, "No audits yet.");
}

function draw(d) {
  drawGlance(d); drawModel(d); drawCurve(d); drawIslands(d); drawRoster(d); drawRounds(d);
  drawAudits(d, d.run_id);
}

async function tick() {
  try {
    if (!ui.runId) {
      const runs = await getJSON("runs");
      if (!runs.length) {
        setConn(true, "Connected");
        notice("No run yet: the service is up but no training run has been created.", "info");
        return;
      }
      ui.runId = runs[runs.length - 1].run_id;
    }
    const d = await getJSON(`runs/${encodeURIComponent(ui.runId)}/dashboard`);
    draw(d);
    ui.lastOk = new Date();
    setConn(true, `Connected: run ${d.run_id}`);
    notice(d.rounds.length ? null : "The run exists but no round has opened yet.", "info");
    $("updated").textContent = `Last update ${ui.lastOk.toLocaleTimeString()}.`;
  } catch (err) {
    const why = err.status === 404 ? `Run "${ui.runId}" was not found.` : "The service is unreachable.";
    setConn(false, "Disconnected");
    notice(`${why} ${ui.lastOk ? `Showing data from ${ui.lastOk.toLocaleTimeString()}; ` : ""}retrying every ${POLL_MS / 1000} s.`);
  }
}

$("chart").addEventListener("keydown", (ev) => {
  const moves = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1 };
  if (ev.key in moves) select(ui.selected + moves[ev.key]);
  else if (ev.key === "Home") select(0);
  else if (ev.key === "End") select(ui.curve.length - 1);
  else return;
  ev.preventDefault();
});
tick();
setInterval(tick, POLL_MS);
