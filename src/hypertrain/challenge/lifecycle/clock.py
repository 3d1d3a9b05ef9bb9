"""What each verified beacon round moves, in order: the dispute games' deadlines first
(:func:`~hypertrain.challenge.disputes.games.tick`), then every unfinished round through
its phases (:mod:`~hypertrain.challenge.rounds.phases`), settling each round at the first
beacon round for which :func:`~hypertrain.challenge.settlement.settle.ready_to_settle` holds.
"""

from __future__ import annotations

from hypertrain.challenge.disputes import games
from hypertrain.challenge.facts.progress import beacon_round
from hypertrain.challenge.rounds import pace
from hypertrain.challenge.rounds.phases import select_round
from hypertrain.challenge.settlement.settle import ready_to_settle, settle_round
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import commit_storage, rounds_storage
from hypertrain.protocol.sqlite import transaction


async def advance(state: ServiceState) -> None:
    """:func:`step` in a worker thread under the writer lock (never on the event loop)."""
    await state.offload(step, state)


def step(state: ServiceState) -> None:
    """Move every unfinished round as far as the clock allows (call under the lock)."""
    if state.current is None:
        return
    now = state.due_round()  # every deadline by the clock: a lagging poll closes, never holds
    verified = state.current.round
    state.prune_nonces()
    games.tick(state)
    for row in rounds_storage.open_rounds(state.conn):
        run_id, index, phase = row.run_id, row.round, row.phase
        closed = pace.commit_close_round(state, row, now) if phase in ("train", "beacon") else None
        if phase == "train" and closed is not None:
            rounds_storage.set_phase(state.conn, run_id, index, "beacon")
            phase = "beacon"
        if phase == "beacon":
            number = (row.commit_deadline if closed is None else closed) + 1
            if number > verified:
                continue  # the selecting round is due but not verified yet: wait for it
            selector = beacon_round(state.conn, state.beacon, state.current, number)
            select_round(state, run_id, index, selector)
            continue
        if phase == "audit" and (
            (row.audit_close_round is not None and now >= row.audit_close_round)
            or pace.audits_done(state, run_id, index)
        ):
            _close_audit(state, run_id, index)
        if phase == "settle" and ready_to_settle(
            state.conn, state.settings, state.manifest(run_id), state.due_round, run_id, index, now
        ):
            _settle(state, run_id, index)


def _close_audit(state: ServiceState, run_id: str, index: int) -> None:
    if commit_storage.has_commits(state.conn, run_id, index):
        rounds_storage.set_phase(state.conn, run_id, index, "merge")
        return
    _settle(state, run_id, index)


def _settle(state: ServiceState, run_id: str, index: int) -> None:
    with transaction(state.conn):
        settle_round(state.books(), run_id, index)
        state.count("rounds_settled")
