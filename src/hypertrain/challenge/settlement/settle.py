"""Final settlement of a round: apply the rule's outcome to the ledger, once.

Settlement pays only proven work. A round is settled once :func:`ready_to_settle` says
so (its merge tape is in and its audit and dispute windows have closed). The decision
itself, paid / held / faulted / unpaid per commit, is the pure rule
:func:`hypertrain.challenge.rule.decide` over the round's typed facts
(:func:`hypertrain.challenge.facts.round_outcome`); this module only books it: the
ledger escrows the accepted tokens (with each hold), burns each fault, and the round is
marked final in the caller's transaction.

The epoch is the metagraph epoch at settlement, so a hotkey deregistered meanwhile
stops earning at the next epoch's weights; with no metagraph snapshot nothing is
booked (:class:`~hypertrain.challenge.errors.UnavailableError`), never at a guessed
epoch.

An island still in probation (the round is one of its first ``audit.probation_rounds``
committed rounds, i.e. before its ``probation_until_round``) has its reward *held*
with no release round (:data:`~hypertrain.challenge.rule.PROBATION_HOLD`): the
ledger keeps it in escrow until the island has served its probation, the event of its
last probation round settled with every probation audit proven
(:func:`release_probation`), so sitting rounds out never lets a calendar vest it and a
fault found in any probation round burns all of it.

An island whose audit in an earlier round of the run is unproven (no judging verdict
yet, or a standing fault that may still change) has its reward held too (the rule's
``earlier`` input): the fault, once proven, burns it with everything unvested, and
every change of a standing verdict (a late ``match``, a dispute decided, a late
window closed) re-runs the hold decision of the later final rounds, releasing each
hold that nothing else keeps (:func:`release_later`). An island with a *proven*
earlier fault has this round's reward escrowed, held and burned at once (the rule's
``forfeited``), exactly what the fault's booking would have done had this round
settled first: the order in which the events arrive changes nothing.

Where the operator requires tape witnesses, a merged round also waits for them: it is
not settled (nothing escrowed, paid or burned) until the rule's tape status is cleared
(:mod:`hypertrain.challenge.settlement.witness`); a contested tape holds it for as long as
it stays the round's current tape.
"""

from __future__ import annotations

import logging
import sqlite3

from hypertrain.challenge import facts
from hypertrain.challenge.errors import PhaseError
from hypertrain.challenge.ports import Books, DueRound
from hypertrain.challenge.rule import HOLDS, PENDING_AUDIT, PROBATION_HOLD, Outcome
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.settlement import reassigned, rollbacks, witness
from hypertrain.challenge.store import roster_storage, rounds_storage
from hypertrain.challenge.store.game_storage import disputes_open
from hypertrain.protocol.manifest import RunManifest

__all__ = [
    "PENDING_AUDIT",
    "PROBATION_HOLD",
    "Outcome",
    "outcome",
    "ready_to_settle",
    "settle_round",
]
log = logging.getLogger(__name__)


def ready_to_settle(
    conn: sqlite3.Connection,
    s: Settings,
    manifest: RunManifest,
    due_round: DueRound,
    run_id: str,
    index: int,
    now: int,
) -> bool:
    """Whether round ``index`` may settle at beacon round ``now``.

    Every condition lives here: the merge tape was accepted (the round is in phase
    ``settle``), the dispute window, which opens at the audit close, has passed, and
    every dispute filed in it is decided, no game its auditor lost is still gathering its
    jury's re-audits (for one window after its decision:
    :func:`~hypertrain.challenge.settlement.reassigned.gathering`), and the witnesses the
    operator requires cleared the round's tape (their wait read by ``due_round``).
    """
    record = rounds_storage.round_record(conn, run_id, index)
    if record is None or record.phase != "settle":
        return False
    deadline = record.dispute_deadline_round
    if deadline is None or now <= int(deadline):
        return False
    if disputes_open(conn, run_id, index):
        return False  # a dispute is still undecided
    if reassigned.gathering(conn, s, manifest, run_id, index, now):
        return False  # a lost game's re-audits may still bar its auditor
    verdict = witness.status(conn, s, due_round, run_id, index)
    return verdict.cleared  # held on a tape not witnessed


def verdict_faults(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, str]:
    """hotkey -> reason for every standing verdict of the round other than ``match``."""
    return facts.round_outcome(conn, run_id, index).faults


def outcome(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str, index: int
) -> Outcome:
    """Decide, for every commit of the round, paid / held / faulted / unpaid (and whether
    the witnesses cleared its tape)."""
    inputs = facts.round_inputs(conn, run_id, index)
    return witness.witnessed_inputs(conn, s, due_round, run_id, index, inputs).outcome()


def settle_round(books: Books, run_id: str, index: int) -> dict[str, int]:
    """Settle inside the caller's transaction; marks the round final (the caller counts
    ``rounds_settled``).

    It decides the round (the database, the witness settings and the clock) and books it
    (the ledger, at the metagraph's epoch); so does every release it completes."""
    conn, ledger = books.conn, books.ledger
    result = outcome(conn, books.settings, books.due_round, run_id, index)
    if not result.tape.cleared:  # fail closed: no booking on a tape the witnesses hold
        raise PhaseError(f"round {index} of {run_id}: its tape is {result.tape.status}")
    epoch = books.metagraph.epoch_now("settle")
    accepted = result.accepted
    ledger.settle_round(run_id, index, accepted, epoch, held=result.held)
    for hotkey, reason in sorted(result.faults.items()):
        rollbacks.book_fault(conn, ledger, run_id, index, hotkey, reason, epoch)
    for hotkey, reason in sorted(result.forfeited.items()):  # its update here was honest:
        ledger.record_fault(run_id, index, hotkey, reason, epoch)  # burn, no rollback
    rounds_storage.add_settlements(conn, run_id, index, accepted, epoch)
    rounds_storage.mark_final(conn, run_id, index, epoch)
    for hotkey, hold in facts.probation_holds(conn, run_id, index).items():
        if hold != PROBATION_HOLD:  # this settlement completed its probation
            release_probation(books, run_id, hotkey)
    log.info(
        "settled round %s/%d: %d islands paid (%d held, %d awaiting a verdict),"
        " %d faults, %d forfeited, %d unpaid, epoch %d",
        run_id,
        index,
        len(accepted),
        len(result.held),
        len(result.pending),
        len(result.faults),
        len(result.forfeited),
        len(result.unpaid),
        epoch,
    )
    return accepted


def release_later(books: Books, run_id: str, index: int, hotkey: str) -> int:
    """A standing verdict of ``hotkey`` in round ``index`` changed: re-run its holds.

    Called on every path that changes a standing verdict (a late verdict, a dispute
    decided, a late window closed). Each final round from ``index`` on that paid
    ``hotkey`` is decided again; where the rule no longer holds it for a verdict nor for
    an unserved probation, its hold ends (until its probation's end, if that is later).
    A hold the rule keeps stays (a forfeited reward was burned at settlement, an
    earlier fault proven later burns it with its own booking). The change may also
    complete the island's probation (:func:`release_probation`). Returns the releases.
    """
    rounds = rounds_storage.settled_rounds(books.conn, run_id, hotkey, index)
    released = rehold(books, run_id, hotkey, rounds)
    return released + release_probation(books, run_id, hotkey)


def release_probation(books: Books, run_id: str, hotkey: str) -> int:
    """Once ``hotkey`` has served its probation, end the hold of every reward it earned
    in probation (each vests from the next settlement on, never before round ``u``).

    Served is an event (:func:`~hypertrain.challenge.rule.probation_holds`): its
    last probation round ``u - 1`` is final and every probation audit is proven. Before
    it, nothing changes. Returns the releases (0 on a repeat).
    """
    conn = books.conn
    until = roster_storage.probation_until(conn, run_id, hotkey)
    if until is None or until < 1:
        return 0
    if facts.probation_holds(conn, run_id, until - 1).get(hotkey) in (None, *HOLDS):
        return 0  # not in probation, or not served yet
    rounds = [r for r in rounds_storage.settled_rounds(conn, run_id, hotkey, 0) if r < until]
    return rehold(books, run_id, hotkey, rounds)


def hold_after(decided: Outcome, hotkey: str) -> int | None:
    """What a round decided again says of ``hotkey``'s held reward: the release round to
    give the ledger (0: vest from the next settlement), or None to keep the hold.

    Only a reward the rule accepts is released: held with a release round, or accepted
    without a hold. A hold the rule keeps (a verdict awaited, an unserved probation)
    stays, and so does the reward of an island the rule no longer accepts (faulted or
    unpaid now): its fault's booking burns it, and a release would let it vest. An
    island missing from the outcome is never read as "release now"."""
    if hotkey not in decided.accepted:
        return None
    until = decided.held.get(hotkey, 0)  # accepted: held until a round, or not held
    return None if until in HOLDS else until


def rehold(books: Books, run_id: str, hotkey: str, rounds: list[int]) -> int:
    """Decide the hold of ``hotkey``'s reward in each final round again; release each
    that the rule accepts and no longer keeps held without a release round
    (:func:`hold_after`). Returns the releases."""
    released = 0
    for later in rounds:
        decided = outcome(books.conn, books.settings, books.due_round, run_id, later)
        until = hold_after(decided, hotkey)
        if until is None:
            if hotkey not in decided.accepted:
                log.warning("round %s/%d: %s's held reward stays held: the rule no longer"
                            " accepts it (%s)", run_id, later, hotkey,
                            decided.faults.get(hotkey) or decided.unpaid.get(hotkey))  # fmt: skip
            continue
        epoch = books.metagraph.epoch_now("release a held reward")
        released += books.ledger.release_hold(run_id, later, hotkey, epoch, until)
    return released
