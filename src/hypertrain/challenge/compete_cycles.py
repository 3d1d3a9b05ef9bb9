"""Competition mode, the clock: evaluation cycles opened and closed by beacon rounds.

Cycle ``k`` of a competition is due at beacon round ``start + (k + 1) × interval``.
When that round is verified the service opens the cycle: its randomness picks the
held-out pages, and the eligible models are fixed (revealed, committed at least
``eligibility_delay_rounds`` before, the hotkey still registered, each hotkey's
newest eligible commitment, and for a model hash committed more than once only the
earliest commitment: a copy is never scored). Evaluators score until the cycle's
deadline; the cycle closes when every model is scored (by every evaluator that
answered, in agreement) or the deadline passes, and its standings settle the ledger.
While a cycle is being scored no later cycle opens: a due cycle that falls inside an
open one is skipped (cycle numbers may have gaps), so evaluators always finish one.
A model with no score, or with scores that disagree, earns nothing that cycle.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from typing import Any

from hypertrain.challenge.compete_intake import spec_of
from hypertrain.challenge.rounds import beacon_round as verified_round
from hypertrain.challenge.state import ServiceState, quick_dumps
from hypertrain.competition.messages import (
    CycleModel,
    CycleTask,
    decode_losses,
    pages_key,
    select_pages,
)
from hypertrain.competition.scoring import Entry, standings
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)


def advance(state: ServiceState) -> None:
    """Open the latest due cycle of every competition and close what can be closed.

    Blocking (beacon fetches, ledger writes): the service runs it in a worker thread
    under the writer lock."""
    if state.current is None:
        return
    now = state.current.round
    for row in state.conn.execute("SELECT * FROM competitions ORDER BY competition_id").fetchall():
        spec = spec_of(state, row["competition_id"])
        still_open = [
            int(c["cycle"])
            for c in state.conn.execute(
                "SELECT cycle FROM compete_cycles WHERE competition_id = ? AND closed = 0",
                (spec.competition_id,),
            )
        ]
        closed = [maybe_close(state, spec, cycle) for cycle in still_open]
        if not all(closed):
            continue  # a cycle is still being scored: the next one waits for it
        due = (now - row["start_beacon_round"]) // spec.cycle.eval_interval_rounds - 1
        if due >= 0 and not _cycle_exists(state.conn, spec.competition_id, due):
            beacon_round = row["start_beacon_round"] + (due + 1) * spec.cycle.eval_interval_rounds
            beacon = verified_round(state, beacon_round)
            task = open_cycle(state, spec, due, beacon.round, beacon.randomness)
            if not task.models:
                maybe_close(state, spec, due)


def _cycle_exists(conn: sqlite3.Connection, cid: str, cycle: int) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM compete_cycles WHERE competition_id = ? AND cycle = ?", (cid, cycle)
        ).fetchone()
    )


def eligible(state: ServiceState, spec: CompetitionSpec, beacon_round: int) -> list[sqlite3.Row]:
    """The commitments scored in a cycle at ``beacon_round``, oldest first."""
    delay = spec.cycle.eligibility_delay_rounds
    rows = state.conn.execute(
        "SELECT * FROM compete_commits WHERE competition_id = ? AND model_sha256 IS NOT NULL"
        " AND commit_beacon_round + ? <= ? ORDER BY commit_beacon_round, commit_id",
        (spec.competition_id, delay, beacon_round),
    ).fetchall()
    first_of_model: dict[str, sqlite3.Row] = {}
    newest_of_hotkey: dict[str, sqlite3.Row] = {}
    for row in rows:
        first_of_model.setdefault(row["model_sha256"], row)
        if first_of_model[row["model_sha256"]] is row and state.metagraph.is_registered(
            row["hotkey"]
        ):
            newest_of_hotkey[row["hotkey"]] = row
    return sorted(
        newest_of_hotkey.values(), key=lambda r: (r["commit_beacon_round"], r["commit_id"])
    )


def open_cycle(
    state: ServiceState, spec: CompetitionSpec, cycle: int, beacon_round: int, randomness: str
) -> CycleTask:
    key = pages_key(spec, cycle, randomness)
    models = [
        CycleModel(
            hotkey=r["hotkey"],
            model_sha256=r["model_sha256"],
            commit_beacon_round=r["commit_beacon_round"],
            commit_id=r["commit_id"],
            files=json.loads(r["files"]),
            base_url=r["base_url"],
        )
        for r in eligible(state, spec, beacon_round)
    ]
    task = CycleTask(
        competition_id=spec.competition_id,
        cycle=cycle,
        beacon_round=beacon_round,
        randomness=randomness,
        pages_key=key,
        pages=select_pages(spec, key),
        score_deadline_round=beacon_round + spec.cycle.score_window_rounds,
        models=models,
    )
    with transaction(state.conn):
        state.conn.execute(
            "INSERT OR IGNORE INTO compete_cycles (competition_id, cycle, beacon_round,"
            " randomness, pages_key, score_deadline, task) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (spec.competition_id, cycle, beacon_round, randomness, key,
             task.score_deadline_round, task.model_dump_json()),
        )  # fmt: skip
    log.info("competition %s: cycle %d opened with %d models", spec.competition_id, cycle,
             len(models))  # fmt: skip
    return task


def agreed_losses(state: ServiceState, cid: str, cycle: int) -> dict[str, str | None]:
    """model hash -> the losses every evaluator reported, or None where they disagree."""
    out: dict[str, str | None] = {}
    for row in state.conn.execute(
        "SELECT model_sha256, losses_f32 FROM compete_scores WHERE competition_id = ?"
        " AND cycle = ? ORDER BY evaluator",
        (cid, cycle),
    ):
        seen = out.setdefault(row["model_sha256"], row["losses_f32"])
        if seen is not None and seen != row["losses_f32"]:
            out[row["model_sha256"]] = None
    return out


def maybe_close(state: ServiceState, spec: CompetitionSpec, cycle: int) -> bool:
    """Close and settle a cycle once all its models are scored or its deadline passed."""
    cid = spec.competition_id
    row = state.conn.execute(
        "SELECT * FROM compete_cycles WHERE competition_id = ? AND cycle = ?", (cid, cycle)
    ).fetchone()
    task = CycleTask.model_validate_json(row["task"])
    scores = agreed_losses(state, cid, cycle)
    complete = all(m.model_sha256 in scores for m in task.models)
    if not complete and state.due_round() <= task.score_deadline_round:
        return False
    snapshot = state.metagraph.snapshot
    if snapshot is None:
        return False
    results = _standings(state, spec, task, scores)
    with transaction(state.conn):
        for r in results:
            state.conn.execute(
                "INSERT INTO compete_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, cycle, r["hotkey"], r["model_sha256"], r["mean_loss"], r["wins"],
                 r["comparisons"], r["win_rate"], r["weight"], r["units"]),
            )  # fmt: skip
        accepted = {r["hotkey"]: r["units"] for r in results if r["units"] > 0}
        state.ledger.settle_round(cid, cycle, accepted, snapshot.epoch)
        state.conn.execute(
            "UPDATE compete_cycles SET closed = 1 WHERE competition_id = ? AND cycle = ?",
            (cid, cycle),
        )
    log.info("competition %s: cycle %d settled %s", cid, cycle, quick_dumps(accepted))
    return True


def _standings(
    state: ServiceState, spec: CompetitionSpec, task: CycleTask, scores: dict[str, str | None]
) -> list[dict[str, Any]]:
    entries = []
    for model in task.models:
        losses_hex = scores.get(model.model_sha256)
        if losses_hex is None:
            continue
        losses = decode_losses(losses_hex)
        entries.append(
            Entry(model.hotkey, model.model_sha256, model.commit_beacon_round,
                  model.commit_id, losses)
        )  # fmt: skip
    table = standings(
        entries, spec.epsilon, task.beacon_round,
        temperature=spec.reward.temperature, units=spec.reward.weight_units,
    )  # fmt: skip
    mean = {e.model_sha: _finite_mean(e.losses) for e in entries}
    return [
        {"hotkey": s.hotkey, "model_sha256": s.model_sha, "mean_loss": mean[s.model_sha],
         "wins": s.wins, "comparisons": s.comparisons, "win_rate": s.win_rate,
         "weight": s.weight, "units": s.units}
        for s in table
    ]  # fmt: skip


def _finite_mean(losses: tuple[float, ...]) -> float | None:
    mean = sum(losses) / len(losses)
    return mean if math.isfinite(mean) else None
