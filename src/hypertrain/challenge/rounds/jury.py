"""Who judges a run: the one definition of its auditors and of every jury drawn from them.

The auditor role of a run (:func:`auditors`) is the listed worker keys
(``HYPERTRAIN_WORKER_HOTKEYS``) less every key that holds another role: the aggregator
keys (``HYPERTRAIN_AGGREGATOR_HOTKEYS``) and any key that signed one of the run's merge
tapes, the competition evaluators (``HYPERTRAIN_EVALUATOR_HOTKEYS``), the listed tape
witnesses (``HYPERTRAIN_WITNESS_HOTKEYS``) and every island of the run's roster (none of
them may sign a verdict: :mod:`~hypertrain.challenge.rounds.roles`). A jury
(:func:`jury`) is those auditors less the keys a decision is about (the island, the
auditor judged); its quorum is a strict majority. The audit phase's early close, a
dispute's re-audits, the barring of an auditor and a missed assignment's late verdicts
all draw from here, so they cannot disagree.

A listed key that never signed a verdict of the run is not *live* (:func:`live`): a
decision that reaches its deadline without a quorum counts the live jurors only, so a
listed key that never audits (an evaluator listed by mistake, a key nobody runs) cannot
keep two agreeing auditors from their majority.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypertrain.challenge.rounds import merge_storage, storage
from hypertrain.challenge.state import ServiceState


def auditors(state: ServiceState, run_id: str) -> tuple[str, ...]:
    """The run's auditor keys (see the module docstring), sorted."""
    s, conn = state.settings, state.conn
    others = s.aggregator_hotkeys | s.evaluator_hotkeys | s.witness_hotkeys
    others |= merge_storage.tape_signers(conn, run_id) | storage.roster_keys(conn, run_id)
    return tuple(sorted(s.worker_hotkeys - others))


def jury(state: ServiceState, run_id: str, exclude: Iterable[str]) -> tuple[str, ...]:
    """The run's auditors less ``exclude`` (the island, the auditor judged), sorted."""
    return tuple(sorted(set(auditors(state, run_id)) - set(exclude)))


def quorum(size: int) -> int:
    """A strict majority of a jury of ``size`` keys (0 for no jury)."""
    return size // 2 + 1 if size else 0


def live(state: ServiceState, run_id: str, keys: Iterable[str], until: int) -> frozenset[str]:
    """Those of ``keys`` that signed a verdict of the run by beacon round ``until``."""
    return frozenset(keys) & storage.verdict_signers(state.conn, run_id, until)
