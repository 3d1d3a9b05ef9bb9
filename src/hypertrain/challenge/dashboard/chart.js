/* Hypertrain dashboard: the training-curve panel. The held-out loss chart (readable with
   the keyboard), its legend, its summary tiles and its table, with the operator's
   data-parallel baseline drawn beside the network's curve when one is published (an
   informational curve: it feeds no hash, verdict or reward). Loaded before app.js, whose
   helpers (el, $, loss, num, dash, ui, roundsDone) these functions use when they are called. */
"use strict";

function drawCurve(d) {
  ui.curve = d.curve.filter((p) => p.heldout_loss !== null);
  ui.summary = d.curve_summary || null;
  ui.baseline = d.baseline || null;
  drawCurveSummary(ui.summary, ui.baseline);
  drawLegend(ui.baseline);
  const tbody = $("curve-table").tBodies[0];
  tbody.replaceChildren(...(d.curve.length ? d.curve.map((p) => el("tr", {},
    el("td", {}, p.round), el("td", {}, loss(p.heldout_loss)), el("td", {}, loss(p.train_loss_self_reported)),
    el("td", { class: "base" }, loss(baselineAt(p.round)))))
    : [el("tr", {}, el("td", { colspan: 4, class: "empty" }, "No rounds finished yet."))]));
  if (ui.selected === null || ui.selected >= ui.curve.length) ui.selected = ui.curve.length - 1;
  renderChart();
}

// The baseline's held-out loss after `round` (null: none published for that round).
function baselineAt(round) {
  const b = ui.baseline;
  return b && round < b.heldout_loss.length ? b.heldout_loss[round] : null;
}

// "held-out loss X (data-parallel on the same tokens: Y, +Z %)": the service's gap at the
// latest round both curves have, in words (null without one).
function gapWords(b) {
  const g = b && b.gap;
  if (!g) return null;
  const sign = g.gap_pct < 0 ? "−" : "+";
  return `held-out loss ${loss(g.heldout_loss)} (${b.label}: ${loss(g.baseline_loss)}, ${sign}${num(Math.abs(g.gap_pct), 1)} %)`;
}

function drawLegend(b) {
  const item = (cls, text) => el("li", { class: cls }, el("span", { class: "swatch", "aria-hidden": "true" }), text);
  $("chart-legend").replaceChildren(item("net", "this network: held-out loss after each round"),
    b ? item("base", `${b.label} (the operator's baseline, informational)`) : null);
}

function renderChart() {
  const pts = ui.curve, box = $("chart");
  if (!pts.length) {
    box.replaceChildren(el("p", { class: "empty" }, "The curve appears after the first merged round."));
    $("chart-readout").textContent = "No rounds finished yet.";
    return;
  }
  const W = 1000, H = 240, L = 52, R = 16, T = 14, B = 34;
  const theirs = pts.map((p) => baselineAt(p.round));
  const ys = [...pts.map((p) => p.heldout_loss), ...theirs.filter((v) => v !== null)];
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
  // the baseline under the network's curve: a dashed line through its points at the same rounds
  const base = theirs.map((v, i) => [i, v]).filter(([, v]) => v !== null);
  if (base.length) svg.append(s("polyline", { class: "line base", points: base.map(([i, v]) => `${x(i)},${y(v)}`).join(" ") }));
  base.forEach(([i, v]) => svg.append(s("circle", { class: "pt base", cx: x(i), cy: y(v), r: 3 })));
  svg.append(s("polyline", { class: "line", points: pts.map((p, i) => `${x(i)},${y(p.heldout_loss)}`).join(" ") }));
  const sum = ui.summary;
  pts.forEach((p, i) => {
    let cls = i === ui.selected ? "pt sel" : "pt";
    if (sum && sum.lowest.round === p.round) cls += " low";
    if (sum && sum.spike && sum.spike.round === p.round) cls += " spike";
    const c = s("circle", { class: cls, cx: x(i), cy: y(p.heldout_loss), r: i === ui.selected ? 6 : 4 });
    c.addEventListener("mouseenter", () => select(i));
    svg.append(c);
    const marks = [];
    if (sum && pts.length > 1 && sum.lowest.round === p.round) marks.push(`low ${loss(p.heldout_loss)} · r${p.round}`);
    if (sum && sum.spike && sum.spike.round === p.round) marks.push(`spike ${loss(p.heldout_loss)} · r${p.round}`);
    marks.forEach((m, k) => svg.append(s("text", { class: "mark", x: Math.min(x(i), W - R - 4),
      y: Math.max(T + 10, y(p.heldout_loss) - 10 - 13 * k), "text-anchor": i === pts.length - 1 ? "end" : "middle" }, m)));
  });
  box.replaceChildren(svg);
  const p = pts[ui.selected], other = theirs[ui.selected];
  $("chart-readout").textContent =
    `Round ${p.round}: held-out loss ${loss(p.heldout_loss)} (${ui.selected + 1} of ${pts.length})` +
    (other === null ? "" : `; ${ui.baseline.label}: ${loss(other)}`);
}

function select(i) {
  if (!ui.curve.length) return;
  ui.selected = Math.max(0, Math.min(ui.curve.length - 1, i));
  renderChart();
}

// The summary tiles; the latest figure carries the gap to the baseline when there is one.
function drawCurveSummary(sum, b) {
  const box = $("curve-summary");
  if (!sum) { box.replaceChildren(el("div", { class: "empty" }, "No held-out loss yet.")); return; }
  const at = (x) => (x ? `${loss(x.loss)} · r${x.round}` : dash);
  const tiles = [
    ["Latest", at(sum.last), gapWords(b)],
    [`Since round ${sum.start.round}`, sum.drop_pct === null ? dash : `${sum.drop_pct > 0 ? "−" : "+"}${num(Math.abs(100 * sum.drop_pct), 1)} %`],
    ["Lowest", at(sum.lowest)],
    [`Highest after r${sum.start.round}`, at(sum.highest_after_first)],
    ["Started at", loss(sum.start.loss)],
    ["Largest spike", sum.spike ? `${at(sum.spike)} (+${loss(sum.spike.rise)})` : "none"],
    ["Rounds done", roundsDone(sum.rounds_done, sum.rounds_total)],
  ];
  box.replaceChildren(...tiles.map(([k, v, gap]) => el("div", { class: gap ? "tile with-gap" : "tile" }, el("dt", {}, k),
    el("dd", {}, v, gap ? el("small", { class: "gap" }, ` ${gap}`) : null))));
}
