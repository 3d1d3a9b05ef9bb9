"""Competition mode, read side: the leaderboard and an evaluator's task."""

from __future__ import annotations

import json
import sqlite3

from hypertrain.challenge.competition.intake import spec_of
from hypertrain.challenge.errors import NotFoundError
from hypertrain.challenge.ports import DueRound
from hypertrain.challenge.store import competition_storage, cycle_storage
from hypertrain.competition.messages import (
    CompetitorPublic,
    CycleRecord,
    CycleResult,
    CycleTask,
    Leaderboard,
)
from hypertrain.competition.spec import CompetitionSpec


def task(conn: sqlite3.Connection, cid: str, evaluator: str | None) -> CycleTask:
    """The newest open cycle, with the models ``evaluator`` already scored marked."""
    spec_of(conn, cid)
    row = cycle_storage.newest_open_cycle(conn, cid)
    if row is None:
        raise NotFoundError(f"competition {cid!r} has no open cycle", code="no_open_cycle")
    scored = cycle_storage.scored_by(conn, cid, row.cycle, evaluator or "")
    return CycleTask.model_validate_json(row.task).model_copy(update={"scored": scored})


def _status(
    row: competition_storage.CommitRow, now: int, delay: int, first_of_model: dict[str, str]
) -> str:
    if row.model_sha256 is None:
        return "committed"
    if first_of_model.get(row.model_sha256) != row.commitment:
        return "duplicate"
    return "eligible" if row.commit_beacon_round + delay <= now else "revealed"


def leaderboard(conn: sqlite3.Connection, due_round: DueRound, cid: str) -> Leaderboard:
    """Every commitment with its status and its standing in the latest settled cycle."""
    spec = spec_of(conn, cid)
    now = due_round()
    latest = cycle_storage.latest_closed_cycle(conn, cid)
    results = {
        (r.hotkey, r.model_sha256): r
        for r in competition_storage.results(conn, cid, latest if latest is not None else -1)
    }
    rows = competition_storage.commits(conn, cid)
    first_of_model: dict[str, str] = {}
    for r in rows:
        if r.model_sha256 is not None:
            first_of_model.setdefault(r.model_sha256, r.commitment)
    out = []
    for r in rows:
        res = results.get((r.hotkey, r.model_sha256)) if r.model_sha256 else None
        out.append(
            CompetitorPublic(
                hotkey=r.hotkey,
                commitment=r.commitment,
                commit_beacon_round=r.commit_beacon_round,
                eligible_round=r.commit_beacon_round + spec.cycle.eligibility_delay_rounds,
                model_sha256=r.model_sha256,
                revealed=r.model_sha256 is not None,
                status=_status(r, now, spec.cycle.eligibility_delay_rounds, first_of_model),
                loss=None if res is None else res.mean_loss,
                win_rate=None if res is None else res.win_rate,
                weight=None if res is None else res.weight,
            )
        )
    out.sort(key=lambda c: (-(c.weight or 0.0), c.commit_beacon_round))
    return Leaderboard(
        competition_id=cid,
        spec_sha256=spec.digest(),
        latest_cycle=latest,
        epsilon_now=epsilon_now(spec, out, now),
        competitors=out,
    )


def epsilon_now(spec: CompetitionSpec, board: list[CompetitorPublic], now: int) -> float:
    """The advantage a newcomer must overcome now: epsilon at the age of the leader, the
    first eligible model of the sorted ``board`` (the latest cycle's best, else the oldest
    eligible one); ``epsilon.start`` while no model is eligible."""
    leader = next((c for c in board if c.status == "eligible"), None)
    if leader is None:
        return spec.epsilon.start
    return spec.epsilon.at(now - leader.commit_beacon_round)


def cycle_record(conn: sqlite3.Connection, cid: str, cycle: int) -> CycleRecord:
    """Everything public about one opened cycle (see :class:`CycleRecord`)."""
    spec_of(conn, cid)
    row = cycle_storage.cycle(conn, cid, cycle)
    if row is None:
        raise NotFoundError(f"competition {cid!r} has no cycle {cycle}", code="unknown_cycle")
    scores = [json.loads(text) for text in cycle_storage.score_envelopes(conn, cid, cycle)]
    results = [
        CycleResult(
            hotkey=r.hotkey, model_sha256=r.model_sha256, mean_loss=r.mean_loss, wins=r.wins,
            comparisons=r.comparisons, win_rate=r.win_rate, weight=r.weight, units=r.units,
            counted=r.counted,
        )
        for r in competition_storage.results(conn, cid, cycle)
    ]  # fmt: skip
    return CycleRecord(
        competition_id=cid, cycle=cycle, closed=row.closed,
        task=CycleTask.model_validate_json(row.task), scores=scores, results=results,
    )  # fmt: skip
