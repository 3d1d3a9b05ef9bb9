/* Hypertrain dashboard: polls the service's read-only JSON and redraws every panel.
   No framework, no build step, no network access beyond this service. All text is
   inserted with textContent, never as HTML. */
"use strict";

const POLL_MS = 2000;
const AUDIT_ROWS = 8;
const params = new URLSearchParams(window.location.search);
const API = new URL("../v1/", window.location.href);
const ui = { selected: null, curve: [], lastOk: null, runId: params.get("run"), summary: null, baseline: null,
  sort: { key: "rank", dir: 1 } };

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
// A time of day in UTC, said so: "14:03:07 UTC" (the service's clock is the beacon's).
function utc(date) { return date ? `${date.toISOString().slice(11, 19)} UTC` : dash; }
function unixUtc(t) { return t === null || t === undefined ? dash : utc(new Date(t * 1000)); }
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
  const total = g.rounds_total;  // the manifest's schedule, from the service
  const finished = g.status === "finished";
  const now = g.round === null || finished ? null : `now round ${g.round} (${g.phase})`;
  const measured = d.curve.filter((p) => p.heldout_loss !== null).length;
  const drop = measured > 1 ? `from ${loss(g.first_heldout_loss)} after round ${d.curve[0].round}` : null;
  const tiles = [
    ["Held-out loss", loss(g.heldout_loss), drop],
    ["Rounds done", roundsDone(g.rounds_done, total), now],
    ["Islands taking part", num(g.islands), null],
    ["Throughput", num(g.tokens_per_s, 0), "merged tokens/s, islands taking part"],
    trafficTile(g.traffic),
    ["Tokens merged", num(g.tokens), "into the model; rejected rounds left out"],
    ["Audits / accused", `${num(g.audits)} / ${num(g.accused)}`,
      `${num(g.proven_faults)} proven fault${g.proven_faults === 1 ? "" : "s"}`],
    ["Run status", g.status, d.beacon.lagging && d.beacon.lag_rounds ? `beacon lagging ${d.beacon.lag_rounds} rounds: commits refused` : (g.beacon_round ? `beacon round ${g.beacon_round}` : null), "status"],
  ];
  $("glance-tiles").replaceChildren(...tiles.map(([k, v, sub, cls]) =>
    el("div", { class: cls ? `tile ${cls}` : "tile" }, el("dt", {}, k),
      el("dd", {}, v, sub ? el("small", {}, ` ${sub}`) : null))));
}

// The one "rounds done" figure (rounds merged, of the schedule's), in the glance and the curve.
function roundsDone(done, total) { return `${num(done)}${total ? ` of ${num(total)}` : ""}`; }

// The headline traffic tile: all-in (every round and the warm start, counted on both
// sides), then the steady state expected at the audit rate and the steady rounds as run;
// the words come from the service (protocol.traffic), never recomputed.
function trafficTile(t) {
  if (!t || !t.all || !t.all.honest_bytes) return ["Traffic vs data-parallel", dash, "no bytes moved yet"];
  const head = t.all_in || t.all;
  const warm = t.all_in && t.all_in.warm_start_bytes ? ", the warm start included" : "";
  const steady = t.steady.rounds > 0 && t.steady.honest_bytes > 0;
  const expected = t.expected ? `; expected at the audit rate ${t.expected.audit_rate}: ${t.expected.words}` : "";
  const sub = `all-in, ${t.all.rounds} rounds${warm}${expected}; ` + (steady
    ? `steady state (${t.steady.rounds} rounds): ${t.steady.words}` : "still in probation");
  return ["Traffic vs data-parallel", head.words, sub];
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
    row("Outer", m.outer.words),
    row("Compression", `${m.compression.codec}${m.compression.entropy ? " entropy-coded" : ""}, blocks of ${m.compression.block_size}`),
    row("Checkpoints", `every ${m.inner.checkpoint_interval} steps`)));
}

function drawIslands(d) {
  const cards = d.islands.map((isl, i) => el("article", { class: "island", "aria-label": isl.name },
    el("h3", {}, isl.name, statusBadge(isl)),
    el("dl", {},
      el("dt", {}, "Miner"), el("dd", { class: "mono", title: isl.hotkey }, short(isl.hotkey)),
      el("dt", {}, "Region"), el("dd", { class: "region" }, isl.region || "not reported"),
      el("dt", {}, "Devices"), el("dd", {}, `${isl.devices} × ${isl.device_model || isl.device_class}`),
      el("dt", {}, "Nodes"), el("dd", {}, deviceSquares(isl)),
      el("dt", {}, "Tokens merged"), el("dd", { class: "tokens" }, num(isl.tokens_merged),
        isl.tokens !== isl.tokens_merged ? el("small", {}, ` of ${num(isl.tokens)} committed`) : null),
      el("dt", {}, "Throughput"), el("dd", {}, `${num(isl.tokens_per_s, 0)} tok/s`),
      el("dt", {}, "Inner steps"), el("dd", {},
        el("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": isl.steps_total,
          "aria-valuenow": isl.steps_done, "aria-label": `${isl.name} inner steps this round` },
        el("span", { style: `width:${(100 * isl.steps_done) / Math.max(1, isl.steps_total)}%` })),
        `${isl.steps_done} / ${isl.steps_total} this round`),
      el("dt", {}, "Last sync"), el("dd", { class: "sync" }, isl.last_sync_round === null ? "not yet"
        : `round ${isl.last_sync_round}${isl.last_sync_unix ? `, ${unixUtc(isl.last_sync_unix)}` : ""}`),
      el("dt", {}, "Token share"), el("dd", {}, `${num(100 * isl.share, 1)} %`))));
  $("islands-body").replaceChildren(cards.length ? el("div", { class: "islands" }, cards)
    : el("p", { class: "empty" }, "No island has joined yet."));
}

function rosterRows(d) {
  const ranked = [...d.islands].sort((a, b) => b.tokens - a.tokens || a.hotkey.localeCompare(b.hotkey))
    .map((m, i) => ({ ...m, rank: i + 1 }));
  const { key, dir } = ui.sort;
  return ranked.sort((a, b) => {
    const x = a[key], y = b[key];
    if (typeof x === "number" || typeof y === "number") return dir * ((x ?? -Infinity) - (y ?? -Infinity));
    return dir * String(x ?? "").localeCompare(String(y ?? ""));
  });
}

function drawRoster(d) {
  ui.lastDoc = d;
  fillBody("roster-table", rosterRows(d).map((m) => el("tr", {},
    el("td", { class: "num rank" }, m.rank),
    el("td", { class: "mono", title: m.hotkey }, short(m.hotkey)), el("td", {}, m.name),
    el("td", {}, statusBadge(m)), el("td", { class: "num" }, num(m.rounds)),
    el("td", { class: "num" }, num(m.tokens)), el("td", { class: "num" }, num(m.tokens_per_s, 0)),
    el("td", { class: "num" }, `${num(100 * m.share, 1)} %`), el("td", { class: "num" }, num(m.escrow)),
    el("td", { class: "num" }, num(m.vested)), el("td", { class: "num" }, num(m.paid)),
    el("td", { class: "num" }, num(m.burned)))),
  12, "No miners yet.");
  for (const th of $("roster-table").tHead.rows[0].cells) {
    th.setAttribute("aria-sort", th.dataset.sort === ui.sort.key ? (ui.sort.dir > 0 ? "ascending" : "descending") : "none");
  }
}

function setupSorting() {
  for (const th of $("roster-table").tHead.rows[0].cells) {
    const key = th.dataset.sort;
    const button = el("button", { type: "button", title: `Sort by ${th.textContent}` }, th.textContent);
    button.addEventListener("click", () => {
      ui.sort = { key, dir: ui.sort.key === key ? -ui.sort.dir : (key === "rank" || key === "hotkey" || key === "name" ? 1 : -1) };
      if (ui.lastDoc) drawRoster(ui.lastDoc);
    });
    th.replaceChildren(button);
  }
}

function drawRounds(d) {
  const rows = d.rounds.slice(-12).reverse().map((r) => el("tr", {},
    el("td", {}, r.round), el("td", { class: "nowrap" }, unixUtc(r.started_unix)),
    el("td", {}, r.phase), el("td", { class: "num" }, num(r.islands)),
    el("td", { class: "num" }, secs(r.compute_s)), el("td", { class: "num" }, secs(r.sync_s)),
    el("td", { class: "num" }, bytes(r.honest_bytes)), el("td", { class: "num" }, bytes(r.data_parallel_bytes)),
    el("td", {}, r.ratio_words, r.probation ? " (probation)" : ""),
    el("td", { class: "num" }, loss(r.eval_loss)),
    el("td", {}, `${r.audits} audited: ${r.verdicts.match} match, ${r.verdicts.mismatch} accused`,
      r.disputes ? `, ${r.disputes} disputed` : "")));
  fillBody("rounds-table", rows, 11, "No rounds yet.");
}

// An island's fault word: "proven fault" once a fault of it is booked (GET /faults),
// "accused" while a standing fault verdict may still be disputed, else null.
function faultWord(isl) {
  if (!isl) return null;
  if (isl.proven_faults > 0) return "proven fault";
  return isl.accused_rounds > 0 ? "accused" : null;
}

// An island's name in the audits table, with the label that says why it is notable: an
// accused or proven-faulty island says so (even in the probation audit that caught it).
function auditedIsland(isl, hotkey, probation) {
  const word = faultWord(isl);
  const label = word ? ` (${word})` : (probation ? " (probation)" : "");
  return `${isl ? isl.name : short(hotkey)}${label}`;
}

// The status badge of a roster row or card ("accused": disputable; "proven_fault": booked).
function statusBadge(isl) {
  return isl.status === "proven_fault" ? badge("proven fault", "proven") : badge(isl.status);
}

function drawAudits(d, runId) {
  const islands = new Map(d.islands.map((m) => [m.hotkey, m]));
  const shown = d.audits.slice(0, AUDIT_ROWS); // newest first
  $("audits-more").textContent = d.audits.length > shown.length
    ? `Showing the ${shown.length} latest of ${d.audits.length} audits; all of them are in the JSON API.` : "";
  const rows = shown.map((a) => {
    const link = el("a", { href: new URL(`runs/${encodeURIComponent(runId)}/rounds/${a.round}`, API).href,
      title: a.beacon_randomness ? `randomness ${a.beacon_randomness}` : null }, `beacon #${a.beacon_round}`);
    const verdicts = a.verdicts.length ? a.verdicts.map((v) => el("div", {}, badge(v.result),
      v.first_bad_leaf !== null && v.first_bad_leaf !== undefined ? ` first bad leaf ${v.first_bad_leaf}` : "",
      v.detail ? ` ${v.detail}` : "", v.counts === false ? el("small", { class: "void" }, " (no longer counts)") : null)) : "pending";
    const outcome = a.accused ? badge("caught", "caught") : (a.verdicts.length ? badge("clean", "clean") : "waiting");
    return el("tr", {}, el("td", {}, a.round),
      el("td", { title: a.hotkey, class: "nowrap who" }, auditedIsland(islands.get(a.hotkey), a.hotkey, a.probation)),
      el("td", {}, link), el("td", {}, a.segments.join(", ") || dash), el("td", {}, verdicts),
      el("td", {}, a.disputes.length ? a.disputes.map((x) => `${x.status}: ${x.reason}`).join("; ") : "none"),
      el("td", {}, outcome, a.accused ? " no reward" : ""));
  });
  fillBody("audits-table", rows, 7, "No audits yet.");
}

function deviceSquares(isl) {
  const nodes = isl.nodes || [];
  if (!nodes.length) return dash;
  return el("div", { class: "devices", role: "img",
    "aria-label": nodes.map((n) => `node ${n.node}: ${n.devices.length} devices`).join("; ") },
    nodes.map((n) => el("span", { class: "node", title: `node ${n.node}` },
      n.devices.map((dv) => el("span", { class: "dev", title: `${dv.name || "device"} #${dv.index} (${dv.class || "?"})` })))));
}

// The round's motion: a marker moves to the station the round has reached (only when it
// moved since the last poll), the commit station pulses twice while the islands send their
// updates, and the settle station flashes once when a merge adds an outer step.
function stationMotion(st, done) {
  const before = ui.station;
  ui.station = { round: st.round, current: st.current, done };
  const moved = !before || before.round !== st.round || before.current !== st.current;
  const merged = before && done > before.done;
  return (id) => {
    if (id !== st.current) return null;
    if (merged && id === "settle") return "flash";
    if (!moved) return null;
    return id === "commit" ? "hop pulse" : "hop";
  };
}

function drawStations(d) {
  const st = d.round_stations;
  const list = $("stations-list");
  if (!st) { list.replaceChildren(el("li", { class: "empty" }, "No station data in the JSON API.")); return; }
  const motion = stationMotion(st, d.glance.rounds_done);
  list.replaceChildren(...st.stations.map((x) => el("li", {
    class: x.id === st.current ? "on" : null, "aria-current": x.id === st.current ? "step" : null,
    "data-station": x.id, "data-motion": motion(x.id) },
    x.id === st.current ? el("span", { class: "marker", "aria-hidden": "true" }) : null,
    el("strong", {}, x.name), x.what)));
}

function draw(d) {
  drawGlance(d); drawStations(d); drawModel(d); drawSync(d); drawArch(d); drawCurve(d); drawIslands(d);
  drawRoster(d); drawRounds(d); drawAudits(d, d.run_id); drawDisputes(d); drawHoneypots(d); drawTraffic(d);
  drawUtilisation(d);
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
    $("updated").textContent = `Last update ${utc(ui.lastOk)}.`;
  } catch (err) {
    const why = err.status === 404 ? `Run "${ui.runId}" was not found.` : "The service is unreachable.";
    setConn(false, "Disconnected");
    notice(`${why} ${ui.lastOk ? `Showing data from ${utc(ui.lastOk)}; ` : ""}retrying every ${POLL_MS / 1000} s.`);
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
setupSorting();
tick();
setInterval(tick, POLL_MS);
