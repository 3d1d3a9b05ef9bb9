/* Hypertrain dashboard: the explanatory and detail panels (architecture, optimizers and
   sync, disputes, honeypots, honest traffic, island utilisation). Loaded before app.js, whose
   helpers (el, $, num, bytes, secs, short, badge, dash) these functions use when called. */
"use strict";

function drawArch(d) {
  const m = d.model, sp = m.spec;
  if (!sp) { $("arch-body").replaceChildren(el("p", { class: "empty" }, "No model spec in the JSON API.")); return; }
  const D = num(sp.d_model), V = num(sp.vocab_size), F = num(sp.ffn_hidden);
  const ffn = sp.moe
    ? `Mixture of experts: ${sp.moe.num_experts} SwiGLU experts, top ${sp.moe.top_k} per token`
    : `SwiGLU feed-forward ${D} → ${F} → ${D}`;
  const flow = el("ol", { class: "flow", "aria-label": "Model, from input to output" },
    el("li", {}, "Input token ids x₁ … xₜ", el("small", {}, `context up to ${num(sp.context_length)} tokens`)),
    el("li", { class: "emb" }, `Token embedding ${V} × ${D}`, el("small", {}, "positions: RoPE inside attention")),
    el("li", { class: "block" }, `Decoder block × ${sp.num_layers} (pre-norm)`,
      el("ol", {},
        el("li", {}, "RMSNorm"),
        el("li", {}, `Causal self-attention, ${sp.num_heads} heads × ${sp.head_dim}`),
        el("li", {}, "+ residual"),
        el("li", {}, "RMSNorm"),
        el("li", {}, ffn),
        el("li", {}, "+ residual"))),
    el("li", {}, "Final RMSNorm"),
    el("li", { class: "head" }, `LM head ${D} → ${V}`, el("small", {}, sp.tied_embeddings ? "tied with the token embedding" : "its own weights")),
    el("li", {}, "softmax: next-token probabilities"));
  const attn = el("figure", { class: "zoom" }, el("figcaption", {}, "Close-up: causal multi-head self-attention"),
    el("ol", {},
      el("li", {}, `hₜ ∈ ℝ^${sp.d_model}`),
      el("li", {}, `W_Q, W_K, W_V · ${D} → ${D}`),
      el("li", {}, `RoPE on Q and K (θ = ${num(sp.rope_theta)})`),
      el("li", {}, `${sp.num_heads} heads: softmax(QKᵀ/√${sp.head_dim} + causal mask) V`),
      el("li", {}, `concat ${sp.num_heads} × ${sp.head_dim} = ${D}`),
      el("li", {}, `W_O · ${D} × ${D} gives uₜ`)));
  const mlp = el("figure", { class: "zoom" }, el("figcaption", {}, sp.moe ? "Close-up: one SwiGLU expert" : "Close-up: SwiGLU feed-forward"),
    el("ol", {},
      el("li", {}, `h′ₜ ∈ ℝ^${sp.d_model}`),
      el("li", {}, `W_gate h and W_up h · ${D} → ${F}`),
      el("li", {}, "SiLU(W_gate h) ⊙ W_up h"),
      el("li", {}, `W_down · ${F} → ${D} gives yₜ`),
      sp.moe ? el("li", {}, `router: top ${sp.moe.top_k} of ${sp.moe.num_experts} experts, weighted sum`) : null));
  $("arch-body").replaceChildren(el("div", { class: "archgrid" }, flow, attn, mlp));
}

function drawSync(d) {
  const m = d.model;
  $("sync-body").replaceChildren(el("ol", { class: "cycle", "aria-label": "One outer round" },
    el("li", {}, "Shared weights θ (the round's start model)"),
    el("li", { class: "arrow", "aria-hidden": "true" }, "↓"),
    el("li", {}, `Inner: ${m.inner.name} × ${m.inner.steps_per_round} local steps on every island`,
      el("small", {}, `lr ${m.inner.lr}, a state hash every ${m.inner.checkpoint_interval} steps`)),
    el("li", { class: "arrow", "aria-hidden": "true" }, "↓"),
    el("li", {}, `Δθ = θ − θ_island, sent as an ${m.compression.codec} pseudo-gradient`,
      el("small", {}, `blocks of ${m.compression.block_size}; no gradients cross the network between syncs`)),
    el("li", { class: "arrow", "aria-hidden": "true" }, "↓"),
    el("li", { class: "outer" }, `Outer: ${m.outer.words}`,
      el("small", {}, "audited updates only, averaged by verified tokens")),
    el("li", { class: "arrow", "aria-hidden": "true" }, "↓"),
    el("li", {}, "New shared weights θ: the next round's start")));
}

function missing(id, field) {
  $(id).replaceChildren(el("p", { class: "empty" },
    `No ${field} data: this run's JSON API has no "${field}" field yet.`));
}

const LEVELS = { open: "opened", step: "step level", layer: "layer level", op: "operation level",
  referee: "referee", recompute: "re-audit", decided: "decided" };

function drawDisputes(d) {
  if (!Array.isArray(d.disputes)) { missing("disputes-body", "disputes"); return; }
  if (!d.disputes.length) { $("disputes-body").replaceChildren(el("p", { class: "empty" }, "No disputes in this run.")); return; }
  const names = new Map(d.islands.map((m) => [m.hotkey, m.name]));
  const where = (x) => [x.step === null ? null : `step ${x.step}`, x.section, x.op].filter((v) => v).join(" · ") || "not narrowed yet";
  $("disputes-body").replaceChildren(el("div", { class: "scroll", tabindex: 0, "aria-label": "Disputes (scrolls sideways)" }, el("table", { id: "disputes-table" },
    el("caption", { class: "vh" }, "Disputes and their narrowing steps"),
    el("thead", {}, el("tr", {}, ["Round", "Island", "Auditor", "Narrowing steps", "Pinned to", "Referee", "Outcome", "Deadline"]
      .map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, d.disputes.map((x) => el("tr", { "data-dispute": x.dispute_id },
      el("td", {}, `${x.round}, segment ${x.segment}`),
      el("td", { title: x.hotkey }, names.get(x.hotkey) || short(x.hotkey)),
      el("td", { class: "mono", title: x.auditor }, short(x.auditor)),
      el("td", {}, el("ol", { class: "steps" }, x.steps.map((st) => el("li", { "data-level": st.level },
        el("strong", {}, LEVELS[st.level] || st.level), st.beacon_round === null ? "" : ` · beacon ${st.beacon_round}`, `: ${st.text}`)))),
      el("td", { class: "where" }, where(x)),
      el("td", { class: "referee mono", title: x.referee || "" }, x.referee ? short(x.referee) : (x.stage === "referee" ? "waiting" : dash)),
      el("td", { class: "outcome" }, x.outcome ? badge(x.outcome) : badge(x.stage, "open"), x.reason ? el("small", {}, ` ${x.reason}`) : null),
      el("td", { class: "deadline" }, x.deadline_round === null ? `decided at beacon ${x.decided_beacon_round}` : `beacon ${x.deadline_round}`)))))));
}

function pct(x) { return x === null || x === undefined ? dash : `${num(100 * x, 1)} %`; }

// A cheat's rounds cheated ("caught in" of them); * when an entry named no first round.
function cheatedRounds(r) {
  if (r.rounds_cheated === null || r.rounds_cheated === undefined) return dash;
  return `${num(r.caught_cheating)} of ${num(r.rounds_cheated)}${r.every_round_assumed ? " *" : ""}`;
}

function drawHoneypots(d) {
  const h = d.honeypots;
  if (!h || typeof h !== "object") { missing("honeypots-body", "honeypots"); return; }
  if (!h.committed) { $("honeypots-body").replaceChildren(el("p", { class: "empty" }, "This run committed to no honeypot list.")); return; }
  if (!h.revealed) {
    $("honeypots-body").replaceChildren(el("p", { class: "empty" },
      `Not revealed yet: the operator committed to its list (${short(h.commitment)}) and may publish it once round ${h.reveal_round} is final.`));
    return;
  }
  const rows = h.rows.map((r) => el("tr", { "data-strategy": `${r.role}:${r.strategy}` },
    el("td", {}, r.role), el("td", {}, r.strategy), el("td", { class: "num" }, num(r.hotkeys)),
    el("td", { class: "num" }, r.role === "island" ? num(r.rounds_run) : `${num(r.verdicts)} verdicts`),
    el("td", { class: "num cheated" }, cheatedRounds(r)),
    el("td", { class: "num" }, num(r.audited)), el("td", { class: "num" }, num(r.caught)),
    el("td", { class: "num catch" }, pct(r.catch_rate)), el("td", { class: "num fp" }, pct(r.false_positive_rate)),
    el("td", { class: "num" }, `${num(r.disputes_won)} / ${num(r.disputes_lost)}`)));
  $("honeypots-body").replaceChildren(
    el("p", {}, `Revealed at beacon ${h.revealed_beacon_round}; the list hashes to the manifest's commitment ${short(h.commitment)}.`),
    el("div", { class: "scroll", tabindex: 0, "aria-label": "Honeypot rates (scrolls sideways)" }, el("table", { id: "honeypots-table" }, el("caption", { class: "vh" }, "Honeypot catch and false-positive rates per strategy"),
      el("thead", {}, el("tr", {}, ["Role", "Strategy", "Hotkeys", "Rounds run", "Caught of rounds cheated", "Audited", "Caught", "Catch rate", "False positives", "Disputes won / lost"]
        .map((x) => el("th", { scope: "col" }, x)))),
      el("tbody", {}, rows))),
    el("p", { class: "hint rate-def" }, "Catch rate: the rounds a cheat was caught in, of the rounds it cheated ",
      "(from the round its revealed list entry says it began cheating; an entry that says none, marked *, counts every round ",
      "it ran). Caught and false positives are the settlement rule's word, never a raw mismatch: rounds a standing fault verdict ",
      "accuses the island in (a verdict a dispute overturned or that was set aside counts for nothing). False positives: ",
      "rounds an honest honeypot was accused in, of the rounds it was audited."));
}

function drawTraffic(d) {
  const t = d.traffic;
  if (!t || typeof t !== "object" || !t.all) { missing("traffic-body", "traffic"); return; }
  if (!t.all.data_parallel_bytes && !t.all.honest_bytes) { $("traffic-body").replaceChildren(el("p", { class: "empty" }, "No round has moved any bytes yet.")); return; }
  const row = (name, x, cls) => el("tr", { class: cls },
    el("th", { scope: "row" }, name), el("td", { class: "num" }, num(x.rounds)),
    el("td", { class: "num honest" }, bytes(x.honest_bytes)), el("td", { class: "num ddp" }, bytes(x.data_parallel_bytes)),
    el("td", { class: "ratio" }, x.rounds ? x.words : dash));
  const parts = Object.entries(t.all.parts).map(([k, v]) => `${k} ${bytes(v)}`).join(", ");
  $("traffic-body").replaceChildren(
    el("div", { class: "scroll", tabindex: 0, "aria-label": "Traffic (scrolls sideways)" },
      el("table", { id: "traffic-table" }, el("caption", { class: "vh" }, "Bytes moved against data-parallel"),
        el("thead", {}, el("tr", {}, ["Rounds", "Count", "Our bytes", "Data-parallel bytes", "Ratio"].map((x) => el("th", { scope: "col" }, x)))),
        el("tbody", {}, t.all_in ? row("All, with the warm start", t.all_in, "all-in") : null,
          row("Steady state", t.steady, "steady"), row("Probation", t.probation, "probation"), row("All", t.all, "all")))),
    el("p", {}, el("small", {}, `Our bytes by kind: ${parts}. ${t.formula}`)));
}


// Island utilisation over the finished rounds, from the service's records (busy: an upper
// bound of compute); one column per cause the service names, joined causes included.
function drawUtilisation(d) {
  const u = d.utilisation;
  if (!u || typeof u !== "object" || !u.all) { missing("utilisation-body", "utilisation"); return; }
  if (!u.rounds) { $("utilisation-body").replaceChildren(el("p", { class: "empty" }, "No round has finished yet: a round counts once the next one opens.")); return; }
  const share = (s, wall) => (s === null || s === undefined ? dash : `${secs(s)} (${pct(wall ? s / wall : null)})`);
  const row = (x, cls) => el("tr", { class: cls, "data-hotkey": x.hotkey || "" },
    el("th", { scope: "row", title: x.hotkey || "" }, x.name),
    el("td", { class: "num rounds" }, `${num(x.committed)} of ${num(x.rounds)}`),
    el("td", { class: "num wall" }, secs(x.wall_s)),
    el("td", { class: "num busy" }, share(x.busy_s, x.wall_s)),
    u.causes.map((c) => el("td", { class: "num", "data-cause": c }, c in x.waiting_s ? share(x.waiting_s[c], x.wall_s) : dash)));
  $("utilisation-body").replaceChildren(
    el("div", { class: "scroll", tabindex: 0, "aria-label": "Utilisation (scrolls sideways)" },
      el("table", { id: "utilisation-table" }, el("caption", { class: "vh" }, "Busy time and waiting by cause, per island and for all islands"),
        el("thead", {}, el("tr", {}, ["Island", "Rounds committed", "Wall time", "Busy (upper bound)", ...u.causes.map((c) => `Waiting: ${c}`)]
          .map((x) => el("th", { scope: "col" }, x)))),
        el("tbody", {}, row(u.all, "all"), u.islands.map((x) => row(x, "one"))))),
    el("p", {}, el("small", {}, `Over ${num(u.rounds)} finished round${u.rounds === 1 ? "" : "s"}, in beacon rounds of ${num(u.period_s)} s; ${u.busy_words}. `,
      "A wait joined by + spans a boundary the service did not record.")));
}
