"""Rounds advance on work: a phase closes when its work is done or its window ends.

A round's commit phase closes at the first of two beacon rounds: its commit
deadline, or the beacon round at which the last rostered island committed. The
audit selection is still the first beacon round strictly after the close, so no
committer could have known it when it committed. An audit phase closes when every
assignment has verdicts from a majority of the listed auditors, or its window ends.
Both answers are recomputed from the database, so a restarted service reaches the same
beacon rounds.

The deadlines in the signed round records do not move: they bound how long a phase
may last, and the dispute deadline stays where selection fixed it.
"""

from __future__ import annotations

from hypertrain.challenge.rounds import facts, merge_storage, storage, verdict_storage
from hypertrain.challenge.state import ServiceState


def commit_close_round(state: ServiceState, row: storage.OpenRound, now: int) -> int | None:
    """The beacon round at which a round's commit phase closed, or None while it is open.

    ``row`` is the open round; ``now`` the latest verified beacon round. An early close
    counts only once a later beacon round exists, so the selecting round is known.
    """
    deadline = row.commit_deadline
    roster = state.roster_of(row.run_id, row.round, row.open_envelope)
    count, last = storage.commit_progress(state.conn, row.run_id, row.round)
    everyone = bool(roster) and count >= len(roster)
    if everyone and last is not None and last <= deadline and now > last:
        return last
    if now > deadline:
        return deadline
    return None


def audits_done(state: ServiceState, run_id: str, index: int) -> bool:
    """True when every audit assignment of a round is judged by a majority of the auditors.

    Each assignment needs a verdict that counts (one set aside because its auditor was
    found faulty does not) and verdicts from a strict majority of :func:`auditors`, so
    the first answer never shuts out a contrary one: with an honest majority, that
    majority holds an honest verdict. With no auditor known, the phase runs until its
    window ends.
    """
    listed = auditors(state, run_id)
    if not listed or facts.unjudged(state.conn, run_id, index):
        return False
    judges: dict[str, set[str]] = {
        hotkey: set() for hotkey in verdict_storage.assigned(state.conn, run_id, index)
    }
    for judged in verdict_storage.judgements(state.conn, run_id, index):
        if judged.auditor in listed and judged.hotkey in judges:
            judges[judged.hotkey].add(judged.auditor)
    return all(len(keys) >= len(listed) // 2 + 1 for keys in judges.values())


def auditors(state: ServiceState, run_id: str) -> tuple[str, ...]:
    """The listed worker keys (``HYPERTRAIN_WORKER_HOTKEYS``) that may audit the run.

    An aggregator key (``HYPERTRAIN_AGGREGATOR_HOTKEYS``, or one that signed one of the
    run's merge tapes) audits nothing, so it is not counted (leaving the count only hands
    the decision to the others).
    """
    tapes = merge_storage.tape_signers(state.conn, run_id)
    return tuple(sorted(state.settings.worker_hotkeys - state.settings.aggregator_hotkeys - tapes))
