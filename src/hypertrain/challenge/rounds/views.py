"""Read-only views for the public JSON routes and the dashboard.

Pure queries over the database (plus the ledger's balances): nothing here
changes state, so every view can be served to anyone.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Final

from hypertrain.api.models import (
    IslandStatus,
    LossPoint,
    RosterEntry,
    RoundDetail,
    RoundSummary,
    RunListItem,
    RunSummary,
    SelectionBeacon,
    VerdictCounts,
    VerdictRecord,
)
from hypertrain.challenge import facts
from hypertrain.challenge.errors import NotFoundError
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.rule import StandingVerdict
from hypertrain.challenge.settlement import rollbacks, witness
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import (
    audit_storage,
    commit_storage,
    game_storage,
    merge_storage,
    roster_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.protocol.envelope import Envelope

BALANCES: Final = ("escrow", "held", "vested", "paid", "burned")


def list_runs(conn: sqlite3.Connection) -> list[RunListItem]:
    return [
        RunListItem(run_id=r.run_id, manifest_digest=r.manifest_digest)
        for r in rounds_storage.runs(conn)
    ]


def manifest_envelope(conn: sqlite3.Connection, run_id: str) -> Envelope:
    text = rounds_storage.manifest_envelope(conn, run_id)
    if text is None:
        raise NotFoundError(f"run {run_id!r} does not exist", code="unknown_run")
    return Envelope.model_validate_json(text)


def round_summaries(state: ServiceState, run_id: str) -> list[RoundSummary]:
    """Per round: phase, deadlines, commits, tokens, bytes, audits, verdicts, loss.

    Every role polls this list, so it is read once per write of the database
    (:meth:`ServiceState.memo`): a poll between two writes costs nothing.
    """
    state.manifest(run_id)

    def read() -> tuple[RoundSummary, ...]:
        return _summaries(state.conn, run_id, run_accusations(state, run_id))

    return list(state.memo("round_summaries", run_id, read))


def run_accusations(state: ServiceState, run_id: str) -> dict[int, dict[str, str]]:
    """:func:`facts.run_accusations`, read once per write of the database (a copy: callers
    may change theirs)."""
    kept = state.memo("run_accusations", run_id, lambda: facts.run_accusations(state.conn, run_id))
    return {index: dict(accused) for index, accused in kept.items()}


def _summaries(
    conn: sqlite3.Connection, run_id: str, accused: dict[int, dict[str, str]]
) -> tuple[RoundSummary, ...]:
    verdicts = _verdict_counts(facts.standing_verdicts(conn, run_id))
    losses = _train_losses(commit_storage.commit_tokens(conn, run_id), accused)
    disputes = game_storage.games_per_round(conn, run_id)
    return tuple(
        RoundSummary(
            round=r.round,
            phase=r.phase,
            open_beacon_round=r.open_beacon_round,
            commit_deadline_round=r.commit_deadline,
            selection_beacon_round=r.selection_beacon_round,
            audit_close_round=r.audit_close_round,
            dispute_deadline_round=r.dispute_deadline_round,
            start_model_sha256=r.start_model_sha256,
            new_model_sha256=r.new_model_sha256,
            tape_sha256=_tape_sha256(conn, run_id, r.round),
            commits=r.commits,
            tokens=r.tokens,
            update_bytes=r.update_bytes,
            train_loss=losses.get(r.round),
            eval_loss=r.eval_loss,
            audits=r.audits,
            verdicts=verdicts.get(r.round, VerdictCounts(match=0, mismatch=0)),
            disputes=disputes.get(r.round, 0),
            settled_epoch=r.settled_epoch,
        )
        for r in rounds_storage.rounds(conn, run_id)
    )


def _tape_sha256(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    tape = rollbacks.current_tape(conn, run_id, index)
    return None if tape is None else tape.tape_sha256


def _verdict_counts(verdicts: list[StandingVerdict]) -> dict[int, VerdictCounts]:
    """round -> counts: ``match`` judged and not at fault (an overturned or outvoted fault
    included; a held or split one is neither), ``mismatch`` standing faults."""
    passes = [v for v in verdicts if v.judged and not v.fault and not v.holds]
    match: Counter[int] = Counter(v.round for v in passes)
    mismatch: Counter[int] = Counter(v.round for v in verdicts if v.fault)
    return {
        index: VerdictCounts(match=match[index], mismatch=mismatch[index])
        for index in {v.round for v in verdicts}
    }


def _train_losses(
    commits: list[commit_storage.CommitTokens], accused: dict[int, dict[str, str]]
) -> dict[int, float]:
    """round -> token-weighted median of the self-reported losses of the commits the round
    does not accuse: one island's claim (never checked by an audit) cannot move it unless
    it holds half the round's tokens (an outsider's finding: a claimed 1e6 set a mean)."""
    by_round: dict[int, list[tuple[float, int]]] = {}
    for c in commits:
        if c.train_loss is None or c.hotkey in accused.get(c.round, {}) or c.tokens <= 0:
            continue
        by_round.setdefault(c.round, []).append((c.train_loss, c.tokens))
    return {index: weighted_median(points) for index, points in by_round.items()}


def weighted_median(points: list[tuple[float, int]]) -> float:
    """The smallest value whose cumulative weight reaches half the total (lower median)."""
    ordered = sorted(points)
    half, seen = sum(w for _, w in ordered) / 2, 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    raise ValueError("a weighted median needs a positive total weight")


def round_detail(state: ServiceState, run_id: str, index: int) -> RoundDetail:
    opened = rounds_storage.open_envelope(state.conn, run_id, index)
    if opened is None:
        raise NotFoundError(f"round {index} of {run_id} does not exist", code="unknown_round")
    summary = next(s for s in round_summaries(state, run_id) if s.round == index)
    merge = merge_storage.merge_envelope(state.conn, run_id, index)
    selector = rounds_storage.selection_beacon(state.conn, run_id, index)
    return RoundDetail(
        **summary.model_dump(exclude={"commits", "verdicts", "tape_sha256"}),
        open=Envelope.model_validate_json(opened),
        commits=[
            Envelope.model_validate_json(text)
            for text in commit_storage.commit_envelopes(state.conn, run_id, index)
        ],
        assignments=assignments(state.conn, run_id, index),
        verdicts=[
            VerdictRecord(verdict_id=verdict_id, envelope=Envelope.model_validate_json(text))
            for verdict_id, text in verdict_storage.verdict_envelopes(state.conn, run_id, index)
        ],
        merge=Envelope.model_validate_json(merge) if merge else None,
        corrections=rollbacks.corrections(state.conn, run_id, index),
        commit_order=commit_storage.commit_order(state.conn, run_id, index),
        selection_beacon=(
            SelectionBeacon(
                round=selector.round, randomness=selector.randomness, signature=selector.signature
            )
            if selector
            else None
        ),
        probation=audit_storage.probation_flags(state.conn, run_id, index),
        witnesses=witness.view(state.conn, state.settings, state.due_round, run_id, index),
    )


def assignments(conn: sqlite3.Connection, run_id: str, index: int) -> list[Envelope]:
    """The coordinator-signed audit assignments of a round."""
    return [
        Envelope.model_validate_json(text)
        for text in audit_storage.assignment_envelopes(conn, run_id, index)
    ]


def roster(state: ServiceState, run_id: str) -> list[RosterEntry]:
    """Per island: admission, probation, commits, faults (accused and proven: two facts,
    :func:`facts.fault_records`) and ledger balances."""
    state.manifest(run_id)
    rows = roster_storage.roster(state.conn, run_id)
    balances = state.ledger.balances(run_id, [r.hotkey for r in rows])
    accused = run_accusations(state, run_id)
    faults = facts.fault_records(accused, facts.proven_faults(state.conn, run_id))
    snapshot = state.metagraph.snapshot
    out: list[RosterEntry] = []
    for r in rows:
        record = faults.get(r.hotkey, facts.FaultRecord(0, 0))
        out.append(
            RosterEntry(
                hotkey=r.hotkey,
                uid=snapshot.hotkeys.get(r.hotkey) if snapshot else None,
                status=_status(state.metagraph, r, record),
                device_class=r.device_class,
                devices=r.num_devices,
                first_round=r.first_round,
                probation_until_round=r.probation_until_round,
                commits=r.commits,
                tokens=r.tokens,
                left_round=r.left_round,
                proven_memory_bytes=r.proven_memory_bytes,
                accused_rounds=record.accused,
                proven_faults=record.proven,
                **balances.get(r.hotkey, dict.fromkeys(BALANCES, 0)),
            )
        )
    return out


def _status(
    metagraph: MetagraphView, r: roster_storage.RosterRow, faults: facts.FaultRecord
) -> IslandStatus:
    """``proven_fault`` once a fault of it is proven, else ``accused`` while a standing
    fault verdict accuses it (see ``api.models.IslandStatus``), else left, probation or
    active; deregistered above all."""
    if not metagraph.is_registered(r.hotkey):
        return "deregistered"
    if faults.proven:
        return "proven_fault"
    if faults.accused:
        return "accused"
    if r.left_round is not None:
        return "left"
    current = r.last_round if r.last_round is not None else 0
    return "probation" if current < r.probation_until_round else "active"


def loss_curve(summaries: list[RoundSummary]) -> list[LossPoint]:
    """The run's loss points, from its :func:`round_summaries`."""
    return [
        LossPoint(round=s.round, train_loss=s.train_loss, eval_loss=s.eval_loss, tokens=s.tokens)
        for s in summaries
        if s.train_loss is not None or s.eval_loss is not None
    ]


def run_summary(state: ServiceState, run_id: str) -> RunSummary:
    manifest = state.manifest(run_id)
    rounds = round_summaries(state, run_id)
    islands = roster(state, run_id)
    return RunSummary(
        run_id=run_id,
        manifest_digest=manifest.digest(),
        coordinator=manifest.coordinator,
        model=manifest.model,
        inner_steps=manifest.round.inner_steps,
        checkpoint_interval=manifest.round.checkpoint_interval,
        rounds=len(rounds),
        current_round=rounds[-1] if rounds else None,
        islands=len(islands),
        islands_by_status=dict(Counter(i.status for i in islands)),
        tokens_total=sum(s.tokens for s in rounds),
        update_bytes_total=sum(s.update_bytes for s in rounds),
        audits_total=sum(s.audits for s in rounds),
        beacon_round=state.current.round if state.current else None,
        accused_total=sum(i.accused_rounds for i in islands),
        proven_faults_total=sum(i.proven_faults for i in islands),
    )
