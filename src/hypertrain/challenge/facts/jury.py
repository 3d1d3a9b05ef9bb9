"""Who judges a run: the one definition of its auditors and of every jury drawn from them.

The auditor role of a run (:func:`auditors`) is the listed worker keys
(``HYPERTRAIN_WORKER_HOTKEYS``) less every key that holds another role: the aggregator
keys (``HYPERTRAIN_AGGREGATOR_HOTKEYS``) and any key that signed one of the run's merge
tapes, the competition evaluators (``HYPERTRAIN_EVALUATOR_HOTKEYS``), the listed tape
witnesses (``HYPERTRAIN_WITNESS_HOTKEYS``) and every island of the run's roster (none of
them may sign a verdict: :mod:`~hypertrain.challenge.facts.roles`). A jury
(:func:`jury`) is those auditors less the keys a decision is about (the island, the
auditor judged); its quorum is a strict majority. The audit phase's early close, a
dispute's re-audits, the barring of an auditor and a missed assignment's late verdicts
all draw from here, so they cannot disagree.

A listed key that never signed a verdict of the run is not *live* (:func:`live`): a
decision that reaches its deadline without a quorum counts the live jurors only, so a
listed key that never audits (an evaluator listed by mistake, a key nobody runs) cannot
keep two agreeing auditors from their majority.

A *standby juror* (``HYPERTRAIN_STANDBY_HOTKEYS``) is an auditor that only re-audits
what the service lists as waiting (set aside, missed, split). It is one of
:func:`auditors` everywhere, so every jury, quorum and barring rule counts it; only
the audit phase's early close asks for a majority of the *active* auditors
(:func:`active`): the auditors less the barred ones (their verdicts never count again)
and less the standby jurors, so a standby key that judges nothing first holds no phase
open. When no such auditor is left (every one barred), the standby jurors *stand in*
(:func:`standing_in`): they are the active auditors, and the service lists each
unjudged assignment of a round in its audit phase as waiting, so they judge it in the
phase.

Each function takes what it reads, never the service's whole state: the open connection
and the settings that list the keys.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from hypertrain.challenge.settings import Settings
from hypertrain.challenge.store import merge_storage, roster_storage, verdict_storage
from hypertrain.challenge.store.reaudit_storage import is_faulty


def auditors(conn: sqlite3.Connection, s: Settings, run_id: str) -> tuple[str, ...]:
    """The run's auditor keys (see the module docstring), sorted."""
    others = s.aggregator_hotkeys | s.evaluator_hotkeys | s.witness_hotkeys
    others |= merge_storage.tape_signers(conn, run_id) | roster_storage.roster_keys(conn, run_id)
    return tuple(sorted(s.worker_hotkeys - others))


def active(conn: sqlite3.Connection, s: Settings, run_id: str) -> tuple[str, ...]:
    """The auditors expected to judge in the audit phase (see the module docstring)."""
    usable = [k for k in auditors(conn, s, run_id) if not is_faulty(conn, run_id, k)]
    first = [k for k in usable if k not in s.standby_hotkeys]
    return tuple(first or usable)


def standing_in(conn: sqlite3.Connection, s: Settings, run_id: str) -> bool:
    """True when the standby jurors stand in for the active auditors (none is left)."""
    return bool(set(active(conn, s, run_id)) & s.standby_hotkeys)


def jury(
    conn: sqlite3.Connection, s: Settings, run_id: str, exclude: Iterable[str]
) -> tuple[str, ...]:
    """The run's auditors less ``exclude`` (the island, the auditor judged), sorted."""
    return tuple(sorted(set(auditors(conn, s, run_id)) - set(exclude)))


def quorum(size: int) -> int:
    """A strict majority of a jury of ``size`` keys (0 for no jury)."""
    return size // 2 + 1 if size else 0


def live(conn: sqlite3.Connection, run_id: str, keys: Iterable[str], until: int) -> frozenset[str]:
    """Those of ``keys`` that signed a verdict of the run by beacon round ``until``."""
    return frozenset(keys) & verdict_storage.verdict_signers(conn, run_id, until)
