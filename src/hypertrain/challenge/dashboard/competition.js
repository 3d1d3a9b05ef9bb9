/* Hypertrain competition leaderboard: polls ../v1/competitions/<id>/leaderboard.
   The competition id comes from ?competition=ID. Text is inserted with textContent. */
"use strict";

const POLL_MS = 2000;
const params = new URLSearchParams(window.location.search);
const competitionId = params.get("competition");
const $ = (id) => document.getElementById(id);
const dash = "—";

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}
function fixed(x, digits) {
  return x === null || x === undefined ? dash : Number(x).toFixed(digits);
}
function tile(label, value) {
  const box = document.createElement("div");
  const dt = document.createElement("dt");
  const dd = document.createElement("dd");
  dt.textContent = label;
  dd.textContent = value;
  box.append(dt, dd);
  return box;
}

function render(board) {
  const leader = board.competitors.find((c) => c.weight !== null);
  $("board-tiles").replaceChildren(
    tile("Competition", board.competition_id),
    tile("Latest settled cycle", board.latest_cycle === null ? dash : String(board.latest_cycle)),
    tile("Submissions", String(board.competitors.length)),
    tile("Leader", leader ? leader.hotkey.slice(0, 12) + "…" : dash),
    tile("Epsilon", `${(board.epsilon_now * 100).toFixed(2)} %`),
  );
  const body = $("board-table").querySelector("tbody");
  if (!board.competitors.length) {
    const row = document.createElement("tr");
    row.append(cell("No submissions yet.", "empty"));
    row.firstChild.colSpan = 7;
    body.replaceChildren(row);
    return;
  }
  body.replaceChildren(...board.competitors.map((c, i) => {
    const row = document.createElement("tr");
    row.dataset.hotkey = c.hotkey;
    row.append(
      cell(String(i + 1)), cell(c.hotkey, "mono"), cell(String(c.commit_beacon_round)),
      cell(c.status), cell(fixed(c.loss, 4)), cell(fixed(c.win_rate, 3)),
      cell(c.weight === null ? dash : `${(c.weight * 100).toFixed(2)} %`),
    );
    return row;
  }));
}

async function poll() {
  if (!competitionId) {
    $("conn").textContent = "Add ?competition=<id> to the address to pick a competition.";
    return;
  }
  const url = new URL(`../v1/competitions/${encodeURIComponent(competitionId)}/leaderboard`,
    window.location.href);
  try {
    const resp = await fetch(url, { cache: "no-store" });
    if (!resp.ok) throw new Error(`the service answered ${resp.status}`);
    render(await resp.json());
    $("notice").hidden = true;
    $("conn").textContent = `Live: updated ${new Date().toISOString().slice(11, 19)} UTC`;
  } catch (err) {
    $("notice").hidden = false;
    $("notice").textContent = `Cannot read the leaderboard: ${err.message}`;
  }
  setTimeout(poll, POLL_MS);
}

poll();
