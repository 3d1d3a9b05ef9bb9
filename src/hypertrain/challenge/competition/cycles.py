"""Competition mode, the clock: evaluation cycles opened and closed by beacon rounds.

Cycle ``k`` of a competition is due at beacon round ``start + (k + 1) × interval``.
When that round is verified the service opens the cycle: its randomness picks the
held-out pages, and the eligible models are fixed (revealed, committed at least
``eligibility_delay_rounds`` before, the hotkey still registered, each hotkey's
newest eligible commitment, and for a model hash committed more than once only the
earliest commitment: a copy is never scored), with the older models that stay in the
order as references (:mod:`hypertrain.competition.references`). Evaluators score until
the cycle's deadline; the cycle closes when every listed model is scored (by every
evaluator that answered, in agreement) or the deadline passes, and its standings settle
the ledger.
While a cycle is being scored no later cycle opens: a due cycle that falls inside an
open one is skipped (cycle numbers may have gaps), so evaluators always finish one.
A model with no score, or with scores that disagree, earns nothing that cycle.
Once the pool is spent no further cycle opens; the service says so once, when the cycle
that revealed its last pages opens (not at every beacon round after).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import numpy as np

from hypertrain.challenge.competition.intake import spec_of
from hypertrain.challenge.facts.progress import beacon_round as verified_round
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.ports import DueRound, LedgerPort
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.state import ServiceState, quick_dumps
from hypertrain.challenge.store import competition_storage, cycle_storage
from hypertrain.competition.messages import (
    CycleModel,
    CycleTask,
    PageProof,
    RevealedPage,
    pages_key,
)
from hypertrain.competition.pool import cycle_positions, pool_spent, pool_tree
from hypertrain.competition.references import Candidate, split
from hypertrain.competition.replay import agreed_losses, cycle_results
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
    for row in competition_storage.competitions(state.conn):
        spec = spec_of(state.conn, row.competition_id)
        still_open = cycle_storage.open_cycles(state.conn, spec.competition_id)
        closed = [
            maybe_close(state.conn, state.ledger, state.metagraph, state.due_round, spec, cycle)
            for cycle in still_open
        ]
        if not all(closed):
            continue  # a cycle is still being scored: the next one waits for it
        due = (now - row.start_beacon_round) // spec.cycle.eval_interval_rounds - 1
        if due >= 0 and cycle_storage.cycle(state.conn, spec.competition_id, due) is None:
            if pool_spent(spec, _used_positions(state.conn, spec.competition_id)):
                continue  # said once, when the cycle that spent it opened
            beacon_round = row.start_beacon_round + (due + 1) * spec.cycle.eval_interval_rounds
            beacon = verified_round(state.conn, state.beacon, state.current, beacon_round)
            task = open_cycle(
                state.conn, state.settings, state.metagraph, state.due_round,
                spec, due, beacon.round, beacon.randomness,
            )  # fmt: skip
            if task is not None and not task.models:
                maybe_close(state.conn, state.ledger, state.metagraph, state.due_round, spec, due)


def eligible(
    conn: sqlite3.Connection, metagraph: MetagraphView, spec: CompetitionSpec, beacon_round: int
) -> tuple[list[competition_storage.RevealedRow], list[competition_storage.RevealedRow]]:
    """(each hotkey's newest eligible commitment, the references) of a cycle at
    ``beacon_round``, both oldest first (see :mod:`hypertrain.competition.references`)."""
    delay = spec.cycle.eligibility_delay_rounds
    rows = competition_storage.revealed_by(conn, spec.competition_id, delay, beacon_round)
    first_of_model: dict[str, competition_storage.RevealedRow] = {}
    for row in rows:
        first_of_model.setdefault(row.model_sha256, row)
    verdicts = competition_storage.ever_counted(conn, spec.competition_id)
    listed = {
        sha: row for sha, row in first_of_model.items() if metagraph.is_registered(row.hotkey)
    }
    candidates = [
        Candidate(r.hotkey, sha, r.commit_beacon_round, r.seq, verdicts.get((r.hotkey, sha)))
        for sha, r in listed.items()
    ]
    entries, references = split(candidates)
    return [listed[c.model_sha] for c in entries], [listed[c.model_sha] for c in references]


def pages_revealable(spec: CompetitionSpec, cycle_beacon_round: int, now: int) -> bool:
    """The one window check of the pool: a cycle's pages are revealed no earlier than
    its beacon round, which is ``eligibility_delay_rounds`` after its last commitment."""
    return now >= cycle_beacon_round


def pool_path(s: Settings, cid: str) -> Path:
    """Where the service keeps a competition's secret pool (never served as a whole)."""
    return s.state_dir / "competitions" / f"{cid}.pool.npy"


def _used_positions(conn: sqlite3.Connection, cid: str) -> list[int]:
    return [p for task in cycle_storage.cycle_tasks(conn, cid) for p in json.loads(task)["pages"]]


def reveal_pages(
    conn: sqlite3.Connection, s: Settings, spec: CompetitionSpec, key: str
) -> list[RevealedPage]:
    """The cycle's pages from the pool, with proofs; empty when the pool is spent."""
    positions = cycle_positions(spec, key, _used_positions(conn, spec.competition_id))
    if not positions:
        return []
    samples = np.load(pool_path(s, spec.competition_id), allow_pickle=False)
    tree = pool_tree(samples)
    return [
        RevealedPage(
            position=p,
            tokens=np.ascontiguousarray(samples[p], dtype="<u4").tobytes().hex(),
            proof=PageProof.model_validate(tree.proof(p).to_json()),
        )
        for p in positions
    ]


def open_cycle(
    conn: sqlite3.Connection,
    s: Settings,
    metagraph: MetagraphView,
    due_round: DueRound,
    spec: CompetitionSpec,
    cycle: int,
    beacon_round: int,
    randomness: str,
) -> CycleTask | None:
    """Open a cycle: reveal its pages and fix its models; None when the pool is spent."""
    if not pages_revealable(spec, beacon_round, due_round()):
        return None
    key = pages_key(spec, cycle, randomness)
    revealed = reveal_pages(conn, s, spec, key)
    if not revealed:
        log.debug("competition %s: the pool is spent; cycle %d not opened",
                  spec.competition_id, cycle)  # fmt: skip
        return None
    entries, references = eligible(conn, metagraph, spec, beacon_round)
    models, kept = [_cycle_model(r) for r in entries], [_cycle_model(r) for r in references]
    task = CycleTask(
        competition_id=spec.competition_id,
        cycle=cycle,
        beacon_round=beacon_round,
        randomness=randomness,
        pages_key=key,
        pages=[p.position for p in revealed],
        revealed=revealed,
        score_deadline_round=beacon_round + spec.cycle.score_window_rounds,
        models=models,
        references=kept,
    )
    with transaction(conn):
        cycle_storage.add_cycle(
            conn,
            cycle_storage.NewCycle(
                competition_id=spec.competition_id,
                cycle=cycle,
                beacon_round=beacon_round,
                randomness=randomness,
                pages_key=key,
                score_deadline=task.score_deadline_round,
                task=task.model_dump_json(),
            ),
        )
    log.info("competition %s: cycle %d opened with %d models and %d references",
             spec.competition_id, cycle, len(models), len(kept))  # fmt: skip
    if pool_spent(spec, _used_positions(conn, spec.competition_id)):
        log.warning("competition %s: the pool is spent: cycle %d revealed its last pages and"
                    " no later cycle opens (create a new competition with a fresh pool)",
                    spec.competition_id, cycle)  # fmt: skip
    return task


def _cycle_model(r: competition_storage.RevealedRow) -> CycleModel:
    return CycleModel(
        hotkey=r.hotkey,
        model_sha256=r.model_sha256,
        commitment=r.commitment,
        commit_beacon_round=r.commit_beacon_round,
        commit_seq=r.seq,
        files=json.loads(r.files),
        base_url=r.base_url,
    )


def stored_scores(conn: sqlite3.Connection, cid: str, cycle: int) -> list[tuple[str, str, str]]:
    """``(model hash, evaluator, losses hex)`` of every score stored for a cycle."""
    return [
        (r.model_sha256, r.evaluator, r.losses_f32) for r in cycle_storage.scores(conn, cid, cycle)
    ]


def maybe_close(
    conn: sqlite3.Connection,
    ledger: LedgerPort,
    metagraph: MetagraphView,
    due_round: DueRound,
    spec: CompetitionSpec,
    cycle: int,
) -> bool:
    """Close and settle a cycle once all its models are scored or its deadline passed."""
    cid = spec.competition_id
    row = cycle_storage.cycle(conn, cid, cycle)
    assert row is not None  # only opened cycles are closed
    task = CycleTask.model_validate_json(row.task)
    scores = agreed_losses(stored_scores(conn, cid, cycle))
    complete = all(m.model_sha256 in scores for m in task.listed())
    if not complete and due_round() <= task.score_deadline_round:
        return False
    snapshot = metagraph.snapshot
    if snapshot is None:
        return False
    results = cycle_results(spec, task, scores)
    with transaction(conn):
        competition_storage.add_results(conn, cid, cycle, results)
        accepted = {r.hotkey: r.units for r in results if r.units > 0}
        ledger.settle_round(cid, cycle, accepted, snapshot.epoch)
        cycle_storage.close_cycle(conn, cid, cycle)
    log.info("competition %s: cycle %d settled %s", cid, cycle, quick_dumps(accepted))
    return True
