"""The platform's ``get_weights``: the ledger's paid amounts per epoch, answered once.

The first successful answer for an epoch is stored as bytes and every later call
returns exactly those bytes, so the platform can rely on the answer being final.

Deregistration burns at the next epoch: before the first answer for an epoch is
computed, every island of any run and every submitter of any competition that is
missing from the metagraph snapshot, or that left between two snapshots the service
saw (gone from one, or listed under another uid: deregistered and registered again,
:func:`note_snapshot`), and still holds unpaid value (escrow or vested) is
deregistered in the ledger, which burns that value. So value is never withheld
across epochs and paid later in a lump: the weights of an answer never sum above
its ``full_share_mass``, and a hotkey that registers again starts from zero. An
epoch older than one already answered is refused with 409 ``epoch_superseded``.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Mapping
from typing import Final

from hypertrain.api.models import WeightsMetadata, WeightsPublic
from hypertrain.challenge.errors import LedgerFaultError, NotFoundError, UnavailableError
from hypertrain.challenge.metagraph import Snapshot, departures
from hypertrain.challenge.state import ServiceState, dumps
from hypertrain.challenge.store import competition_storage, platform_storage, roster_storage
from hypertrain.challenge.store.platform_storage import Departure
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.sqlite import transaction

MAX_WEIGHTS: Final = 65536


def answer(state: ServiceState, epoch: int) -> bytes:
    """The answer for ``epoch``: a stored one read without the lock, else computed under it.

    A stored answer is final, so reading it through the second connection never waits
    for a settlement that holds the writer lock (or its ledger ``fsync``).
    """
    if state.reader is not None:
        stored = platform_storage.answer(state.reader, epoch)
        if stored is not None:
            return stored
    with state.lock:
        return weights_body(state, epoch)


def weights_body(state: ServiceState, epoch: int) -> bytes:
    """The persisted answer for ``epoch``, computing and storing it on first call."""
    stored = platform_storage.answer(state.conn, epoch)
    if stored is not None:
        return stored
    snapshot = state.metagraph.snapshot
    if snapshot is None:
        raise UnavailableError("no metagraph snapshot yet; cannot score", code="no_metagraph")
    burn_departed(state, epoch, frozenset(snapshot.hotkeys))
    answer = state.ledger.get_weights(epoch, sorted(snapshot.hotkeys))
    weights = dict(answer.weights)
    bad = [k for k, v in weights.items() if not math.isfinite(v) or v < 0]
    if bad or len(weights) > MAX_WEIGHTS or not math.isfinite(answer.full_share_mass):
        raise UnavailableError(
            "ledger produced invalid weights; refusing to answer", code="bad_weights"
        )
    public = WeightsPublic(
        challenge_slug=state.settings.slug,
        epoch=epoch,
        weights=weights,
        full_share_mass=answer.full_share_mass,
        metadata=WeightsMetadata(
            ledger_answer_sha256=answer.ledger_answer_sha256, metagraph_epoch=snapshot.epoch
        ),
        computed_at=int(time.time()),
    )
    body = canonical_bytes(public.model_dump(mode="json", exclude_none=True))
    return platform_storage.keep_answer(state.conn, epoch, body)


def latest_weights_body(conn: sqlite3.Connection) -> bytes:
    """The stored answer of the newest epoch answered so far (never computes one)."""
    body = platform_storage.latest_answer(conn)
    if body is None:
        raise NotFoundError("no epoch has been answered yet", code="no_weights")
    return body


def note_snapshot(conn: sqlite3.Connection, before: Snapshot | None, fresh: Snapshot) -> int:
    """Store a fresh snapshot with the hotkeys that left since ``before``; how many left.

    A hotkey left when ``fresh`` no longer lists it or lists it under another uid
    (:func:`~hypertrain.challenge.metagraph.departures`). The departure is kept until
    the next epoch's first answer burns it (:func:`burn_departed`), so a hotkey that
    is deregistered and registered again between two answers still loses the old
    registration's value, whatever mode earned it.
    """
    left = {} if before is None else departures(before, fresh)
    with transaction(conn):
        if before is not None:
            platform_storage.note_departures(
                conn,
                [Departure(h, before.hotkeys[h], uid, fresh.epoch) for h, uid in left.items()],
            )
        platform_storage.save_snapshot(conn, dumps(fresh.to_json()), time.time())
    return len(left)


def unpaid_value(run_id: str, hotkey: str, balance: Mapping[str, int]) -> int:
    """The value a departed hotkey still holds in a run (escrow and vested), to burn. A
    balance the ledger answered without those figures is a ledger fault
    (:class:`LedgerFaultError`), never read as nothing to burn."""
    try:
        return balance["escrow"] + balance["vested"]
    except KeyError as exc:
        raise LedgerFaultError(
            f"the ledger's balance of {hotkey} in run {run_id!r} has no {exc.args[0]!r} figure"
        ) from None


def burn_departed(state: ServiceState, epoch: int, registered: frozenset[str]) -> dict[str, int]:
    """Deregister every earner with unpaid value that left; hotkey -> burned.

    Left: not registered now, or noted as departed since the last answer (gone from a
    snapshot, or registered again under a new uid). Earners are the islands of every
    run's roster and the submitters of every competition (a competition's ledger
    account is named by its id), so a hotkey that only ever competed is burned like an
    island. The departures noted so far are consumed by this answer.
    """
    burned: dict[str, int] = {}
    by_run: dict[str, list[str]] = {}
    departed = platform_storage.departed(state.conn)
    earners = set(roster_storage.islands(state.conn))
    earners |= set(competition_storage.submitters(state.conn))
    for run_id, hotkey in sorted(earners):
        if hotkey not in registered or hotkey in departed:
            by_run.setdefault(run_id, []).append(hotkey)
    holding: set[str] = set()
    for run_id, hotkeys in by_run.items():
        for hotkey, bal in state.ledger.balances(run_id, hotkeys).items():
            if unpaid_value(run_id, hotkey, bal):
                holding.add(hotkey)
    for hotkey in sorted(holding):
        burned[hotkey] = state.ledger.deregister(hotkey, epoch)
        state.count("deregistrations")
    platform_storage.clear_departures(state.conn)
    return burned
