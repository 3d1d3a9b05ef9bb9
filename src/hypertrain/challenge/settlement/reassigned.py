"""Audits waiting for another auditor's verdict: set aside, or missed.

A verdict stops counting when a dispute sets it aside (a ``recompute`` game, a lost
bisection game) or its auditor is found faulty; its assignment is listed until
another auditor's counting verdict arrives (a ``recompute`` game keeps it listed
until its quorum is reached). An assignment no verdict judged by the end of the audit
phase is listed as missed: its island's reward is held until one comes; so is a split one
(its judges hold no majority either way) while it takes late verdicts. While the
standby jurors stand in (every other auditor barred:
:func:`~hypertrain.challenge.facts.jury.standing_in`), an assignment of a round in its
audit phase that no verdict judged yet is listed as missed at once, so they judge it
in the phase.
"""

from __future__ import annotations

import sqlite3
from json import loads

from hypertrain.api.disputes import ReassignedAudit
from hypertrain.challenge import facts
from hypertrain.challenge.facts import jury
from hypertrain.challenge.ports import DueRound
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.store import (
    audit_storage,
    game_storage,
    late_panel_storage,
    reaudit_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest


def waiting(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str
) -> list[ReassignedAudit]:
    """Audits waiting for a new verdict: set aside (a faulty auditor, a recompute
    dispute) or missed (assigned, and no verdict by the end of the audit phase), of a
    run the caller checked exists."""
    auditors = frozenset(jury.auditors(conn, s, run_id))
    set_aside = [
        ReassignedAudit(
            round=x.round,
            hotkey=x.hotkey,
            auditor=x.auditor,
            verdict_id=x.verdict_id,
            dispute_id=x.dispute_id,
            missed=False,
            assignment=Envelope.model_validate(loads(envelope)),
        )
        for x in reaudit_storage.set_aside_verdicts(conn, run_id)
        if (envelope := _still_waiting(conn, run_id, x, auditors)) is not None
    ]
    missed = [
        _missed(a.round, a.hotkey, a.envelope)
        for a in audit_storage.unjudged_audits(conn, run_id, due_round())
        if a.hotkey in facts.unjudged(conn, run_id, a.round)
    ]
    listed = set_aside + missed + _splits(conn, run_id, due_round())
    listed_keys = {(x.round, x.hotkey) for x in listed}
    return listed + _stood_in(conn, s, run_id, listed_keys)


def _stood_in(
    conn: sqlite3.Connection, s: Settings, run_id: str, listed: set[tuple[int, str]]
) -> list[ReassignedAudit]:
    """Unjudged assignments of rounds in their audit phase, while standby jurors stand in
    (each audit once: one already ``listed`` as set aside is not listed again)."""
    if not jury.standing_in(conn, s, run_id):
        return []
    return [
        _missed(a.round, a.hotkey, a.envelope)
        for a in audit_storage.audit_phase_audits(conn, run_id)
        if (a.round, a.hotkey) not in listed and a.hotkey in facts.unjudged(conn, run_id, a.round)
    ]


def _missed(index: int, hotkey: str, envelope: str) -> ReassignedAudit:
    """A listed assignment no verdict decided (missed, or split)."""
    return ReassignedAudit(
        round=index,
        hotkey=hotkey,
        auditor="",
        verdict_id="",
        dispute_id="",
        missed=True,
        assignment=Envelope.model_validate(loads(envelope)),
    )


def _splits(conn: sqlite3.Connection, run_id: str, now: int) -> list[ReassignedAudit]:
    """Split assignments past their audit phase (no majority either way) that still take
    late verdicts at beacon round ``now``: listed as missed, so the auditors that did not
    judge them do."""
    out: list[ReassignedAudit] = []
    split = sorted({(v.round, v.hotkey) for v in facts.standing_verdicts(conn, run_id)
                    if v.standing == "split"})  # fmt: skip
    for index, hotkey in split:
        row = rounds_storage.round_record(conn, run_id, index)
        panel = late_panel_storage.late_panel(conn, run_id, index, hotkey)
        envelope = audit_storage.assignment_envelope(conn, run_id, index, hotkey)
        if row is None or row.phase not in ("merge", "settle", "final") or envelope is None:
            continue
        if panel is None or now <= panel.close_round:
            out.append(_missed(index, hotkey, envelope))
    return out


def _still_waiting(
    conn: sqlite3.Connection, run_id: str, x: reaudit_storage.SetAside, auditors: frozenset[str]
) -> str | None:
    """The assignment of a set-aside verdict while it waits for another auditor's
    counting verdict (None: one came, or it was never assigned).

    An assignment whose ``recompute`` dispute is undecided stays listed whatever verdicts
    it already has: its quorum of re-audits is still being gathered; so does one whose
    bisection game its auditor lost, until a majority of the game's jury re-audited it
    (the barring rule's evidence) or the auditor is barred.
    """
    envelope = audit_storage.assignment_envelope(conn, run_id, x.round, x.hotkey)
    if envelope is None:
        return None
    verdicts = verdict_storage.verdicts_on(conn, run_id, x.round, x.hotkey)
    counted = any(not reaudit_storage.is_reassigned(conn, v.verdict_id) for v in verdicts)
    return envelope if x.recompute or not counted or _gathering(conn, x, auditors) else None


def _gathering(
    conn: sqlite3.Connection, x: reaudit_storage.SetAside, auditors: frozenset[str]
) -> bool:
    """A lost bisection game still short of its jury's majority of re-audits.

    The jury counted is the game's jurors that are still the run's auditors: a key that
    has since taken another role (an unnamed aggregator that signed a tape) will never
    re-audit, so it cannot keep the assignment listed forever.
    """
    game = game_storage.load_game(conn, x.dispute_id) if x.dispute_id else None
    if game is None or game.check != "segment" or game.outcome != "overturned":
        return False
    panel = set(game.jury) & auditors
    if not panel or reaudit_storage.is_faulty(conn, game.run_id, game.auditor):
        return False
    judges = {v.auditor for v in verdict_storage.verdicts_on(conn, game.run_id, x.round, x.hotkey)}
    return len(judges & panel) < jury.quorum(len(panel))


def gathering(
    conn: sqlite3.Connection, s: Settings, manifest: RunManifest, run_id: str, index: int, now: int
) -> bool:
    """True while a bisection game of round ``index`` that its auditor lost still gathers
    its jury's re-audits (the barring rule's evidence, :func:`_gathering`), for at most
    ``round.dispute_window_rounds`` after the game's decision.

    Settlement waits for it: barring sets aside the auditor's verdicts of rounds not final
    yet, so a round that settled in between would keep a liar's other verdicts of it (a
    cheat it passed) beyond any re-audit. The wait is bounded, so a silent jury holds a
    round one window at most.
    """
    auditors = frozenset(jury.auditors(conn, s, run_id))
    window = manifest.round.dispute_window_rounds
    for x in reaudit_storage.set_aside_verdicts(conn, run_id):
        if x.round != index or not x.dispute_id or x.recompute:
            continue
        view = game_storage.load_view(conn, x.dispute_id)
        decided = view.decided_beacon_round if view is not None else None
        if decided is not None and now <= decided + window and _gathering(conn, x, auditors):
            return True
    return False
