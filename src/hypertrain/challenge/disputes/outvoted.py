"""A fault verdict the judges' majority outvoted counts against its auditor.

An ``outvoted`` verdict (:func:`~hypertrain.challenge.rule.jury_standing`: a
strict majority of the assignment's judges found ``match``) is overturned by the audit
phase's own verdicts, as if a ``recompute`` dispute had been decided by that quorum. It
is evidence for the one barring rule (:func:`~hypertrain.dispute.resolution.bars`): its
auditor is barred once ``match`` verdicts from a strict majority of its jury (the run's
auditors less it and the island, :func:`~hypertrain.challenge.facts.jury.jury`), never
fewer than two, stand on the assignment. For an ``unverifiable`` verdict only those
received by the round's upload deadline count (they prove the bytes were served in
time). Barring sets aside the auditor's verdicts of rounds not final yet, as on every
path. The caller holds the transaction.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge import facts
from hypertrain.challenge.facts import jury
from hypertrain.challenge.rule import StandingVerdict
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.store import reaudit_storage, rounds_storage, verdict_storage
from hypertrain.dispute.resolution import bars
from hypertrain.protocol.deadlines import upload_deadline


def bar_outvoted(
    conn: sqlite3.Connection, s: Settings, run_id: str, index: int, hotkey: str, now: int
) -> int:
    """Bar each auditor of an outvoted verdict on the assignment that meets the rule."""
    on = [v for v in facts.standing_verdicts(conn, run_id, index) if v.hotkey == hotkey]
    barred = 0
    for v in on:
        if v.standing != "outvoted" or reaudit_storage.is_faulty(conn, run_id, v.auditor):
            continue
        if bars(
            jury.jury(conn, s, run_id, {hotkey, v.auditor}),
            _evidence(conn, run_id, v, on),
        ):
            outvoted = reaudit_storage.OutvotedVerdict(run_id, index, v.auditor, v.verdict_id)
            unfinal = verdict_storage.unfinal_verdicts_by(conn, run_id, v.auditor)
            reaudit_storage.bar_outvoted(conn, outvoted, now, unfinal)
            barred += 1
    return barred


def _evidence(
    conn: sqlite3.Connection, run_id: str, v: StandingVerdict, on: list[StandingVerdict]
) -> dict[str, str]:
    """The standing ``match`` verdicts that count against ``v`` (auditor -> result)."""
    by: int | None = None
    if v.result == "unverifiable":
        span = rounds_storage.audit_span(conn, run_id, v.round)
        if span is None:
            return {}
        by = upload_deadline(span[0], span[1] - span[0])
    return {
        u.auditor: u.result
        for u in on
        if u.standing == "stands" and u.result == "match" and (by is None or u.received <= by)
    }
