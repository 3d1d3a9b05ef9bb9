"""Rounds advance on work: a phase closes when its work is done or its window ends.

A round's commit phase closes at the first of two beacon rounds: its commit
deadline, or the beacon round at which the last *awaited* island committed: every
rostered island except one that was rostered in the round before and committed nothing
to it, and except one an earlier round faulted (:func:`awaited`). A silent island may
still commit inside the window, but its silence holds no later round open: an admitted
island that never trains delays at most its first round, not every round of the run, and
a caught island (a standing fault, the settlement rule's
:func:`~hypertrain.challenge.facts.accused_before`) holds none, however it
alternates junk commits with silence (outsiders' findings). The
audit selection is still the first beacon round strictly after the close, so no
committer could have known it when it committed. An audit phase closes when every
assignment has agreeing verdicts from a strict majority of the active auditors (all
``match``, or all a fault: a split keeps the phase open for the rest), or its window ends.
The active auditors are the listed ones less the standby jurors, which re-audit only
(:func:`~hypertrain.challenge.facts.jury.active`); a standby juror's agreeing verdict
still counts towards the majority.
Both answers are recomputed from the database, so a restarted service reaches the same
beacon rounds (a fault overturned between a commit phase's early close and its selection
can only move that selection to the deadline's successor).

The deadlines in the signed round records do not move: they bound how long a phase
may last, and the dispute deadline stays where selection fixed it.
"""

from __future__ import annotations

from hypertrain.challenge import facts, rule
from hypertrain.challenge.facts import jury
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import commit_storage, rounds_storage, verdict_storage


def commit_close_round(state: ServiceState, row: rounds_storage.OpenRound, now: int) -> int | None:
    """The beacon round at which a round's commit phase closed, or None while it is open.

    ``row`` is the open round; ``now`` the latest verified beacon round. An early close
    counts only once a later beacon round exists, so the selecting round is known.
    """
    deadline = row.commit_deadline
    waiting = awaited(state, row)
    committed = commit_storage.committers(state.conn, row.run_id, row.round)
    _, last = commit_storage.commit_progress(state.conn, row.run_id, row.round)
    everyone = bool(waiting) and waiting <= committed
    if everyone and last is not None and last <= deadline and now > last:
        return last
    if now > deadline:
        return deadline
    return None


def awaited(state: ServiceState, row: rounds_storage.OpenRound) -> frozenset[str]:
    """The rostered islands whose commits close the commit phase early: the roster less
    the islands that were rostered in the round before and committed nothing to it, and
    less every island with a standing fault in an earlier round (for the rest of the run,
    or until a dispute overturns the fault: a caught island is replayed every round and
    gains nothing by being waited for)."""
    roster = state.roster_of(row.run_id, row.round, row.open_envelope)
    if row.round == 0:
        return roster
    roster -= facts.accused_before(state.conn, row.run_id, row.round)
    before = rounds_storage.open_envelope(state.conn, row.run_id, row.round - 1)
    if before is None:
        return roster
    silent = state.roster_of(row.run_id, row.round - 1, before) - commit_storage.committers(
        state.conn, row.run_id, row.round - 1
    )
    return roster - silent


def audits_done(state: ServiceState, run_id: str, index: int) -> bool:
    """True when every audit assignment of a round is judged by an agreeing majority.

    Each assignment needs a verdict that counts (one set aside because its auditor was
    found faulty does not) and agreeing verdicts (all ``match``, or all a fault, by the
    one standing) from as many auditors as a strict majority of the run's active
    auditors (:func:`~hypertrain.challenge.facts.jury.active`), so neither the first
    answer nor a contrary one shuts out the rest: with an honest active majority, that
    majority holds an honest verdict and outvotes a liar before the phase closes.
    With no active auditor known (none listed, or only standby jurors), the phase runs
    until its window ends.
    """
    listed = set(jury.auditors(state.conn, state.settings, run_id))
    active = jury.active(state.conn, state.settings, run_id)
    if not active or facts.unjudged(state.conn, run_id, index):
        return False
    judges = verdict_storage.judges_of(state.conn, run_id, index)
    need = jury.quorum(len(active))
    agree = rule.agreeing(facts.standing_verdicts(state.conn, run_id, index), listed)
    return all(agree.get(h, 0) >= need for h in judges)
