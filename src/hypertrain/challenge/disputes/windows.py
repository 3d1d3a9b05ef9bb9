"""Late verdicts' own dispute windows: when each may still be disputed, and its fault.

A verdict's dispute window runs from its arrival, never from the round's schedule alone
(:func:`verdict_deadline`). A fault verdict that arrives after its round's window gets a
row in ``verdict_windows``: while it is open a round not yet final waits to settle
(``game_storage.disputes_open``); for a round already final, :func:`close_windows`
books the fault in the ledger only once the window closed undisputed or its dispute
was upheld, so a late verdict never faults before the island could contest it.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge import facts
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.ports import LedgerPort
from hypertrain.challenge.settlement import rollbacks
from hypertrain.challenge.store import rounds_storage, verdict_storage, window_storage
from hypertrain.challenge.store.verdict_storage import VerdictRecord
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.sqlite import transaction

FAULT_RESULTS: frozenset[str] = frozenset({"mismatch", "unverifiable"})


def verdict_deadline(
    manifest: RunManifest, round_deadline: int | None, verdict: VerdictRecord
) -> int | None:
    """The last beacon round a verdict may be disputed: its own window, from its arrival.

    A verdict in the audit window keeps the round's deadline (audit close plus
    ``round.dispute_window_rounds``); one that arrived later (a re-audit, a late verdict)
    gets a full window of its own from the beacon round it was received at (``manifest``:
    the verdict's run's).
    """
    if round_deadline is None:
        return None
    window = manifest.round.dispute_window_rounds
    return max(int(round_deadline), verdict.received_beacon_round + window)


def open_late_window(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    run_id: str,
    index: int,
    hotkey: str,
    auditor: str,
    now: int,
) -> None:
    """A fault verdict past its round's dispute window holds settlement for its own one."""
    verdict = verdict_storage.verdict_by(conn, run_id, index, hotkey, auditor)
    round_ = rounds_storage.round_state(conn, run_id, index)
    if verdict is None or round_ is None:
        return
    if round_.phase == "final" or verdict.result not in FAULT_RESULTS:
        return  # a final round's late fault has its window from the intake's transaction
    round_deadline = round_.dispute_deadline_round
    deadline = verdict_deadline(manifest, round_deadline, verdict)
    if deadline is not None and round_deadline is not None and deadline > round_deadline:
        with transaction(conn):
            window_storage.open_window(conn, verdict, deadline, books_fault=False)


def close_windows(
    conn: sqlite3.Connection, ledger: LedgerPort, metagraph: MetagraphView, now: int
) -> int:
    """Close the late verdicts' windows that are due; book the faults they now prove.

    A window closes past its deadline with no dispute, or once its dispute is decided;
    a verdict of a final round then faults its island (``late <result> verdict``) unless
    its dispute overturned it or it is set aside for another auditor's re-audit.
    """
    if metagraph.snapshot is None:
        return 0  # no epoch to book at: the windows stay open till one
    closed = 0
    for row in window_storage.due_windows(conn, now):
        if row.disputed and row.outcome is None:
            continue  # the dispute is undecided: it holds the window
        with transaction(conn):
            faults = _still_a_fault(conn, row.run_id, row.round, row.verdict_id)
            if row.books_fault and faults:
                reason = f"late {row.result} verdict {row.verdict_id}"
                rollbacks.book_fault(
                    conn,
                    ledger,
                    row.run_id,
                    row.round,
                    row.hotkey,
                    reason,
                    metagraph.epoch_now("book a late verdict"),
                )
            window_storage.close_window(conn, row.verdict_id)
        closed += 1
    return closed


def _still_a_fault(conn: sqlite3.Connection, run_id: str, index: int, verdict_id: str) -> bool:
    """Whether the verdict is a fault by its one standing (not overturned, set aside,
    outvoted by the judges' majority nor split: :func:`facts.standing_verdicts`)."""
    verdicts = facts.standing_verdicts(conn, run_id, index)
    return any(v.verdict_id == verdict_id and v.fault for v in verdicts)
