"""Proven faults of merged rounds, and the corrected merge tapes that roll them back.

Every path that proves a fault (a settlement's standing fault verdict, a late verdict
whose own dispute window closed, an audit re-judged after its auditor was set aside)
books it through :func:`book_fault`: one row in ``proven_faults`` and the ledger's burn,
in the caller's transaction. ``GET /v1/runs/{run}/faults`` lists those rows
(:func:`proven_faults`) with ``rollback_due`` while the faulty update is still in the
round's current merge or a later merged round still starts from a superseded model
(:func:`first_broken_link`: a round that opened before the rollback, or an interrupted
rebase). That is what the aggregator polls; nothing is read from log lines.

A rollback is answered by ``merge-correction`` envelopes
(:func:`~hypertrain.challenge.rounds.tapes.accept_correction`, which checks each with
:func:`check_correction`), one per corrected round, each naming the tape it supersedes.
The service keeps the supersession chain (``merge_corrections``; a tape is superseded at
most once) and refuses, before storing anything:

* a signer that is not a worker hotkey;
* a supersession of anything but the round's *current* tape (``superseded``);
* a correction citing a fault that was never proven, or one it may not cite
  (:func:`hypertrain.protocol.citations.may_cite`: a later round's; ``fault_not_proven``);
* a corrected tape that still includes an island proven faulty in its round;
* a start model that is not one its predecessor allows (:func:`predecessor_models`,
  ``broken_chain``): the corrected chain is one chain, rebuilt in round order;
* a correction that corrects nothing (``nothing_to_correct``).

Where tape witnesses are required, the chain the next round opens on is read here too:
a correction citing a proven fault no earlier correction of its round cited restarts the
round's witness wait (:func:`wait_start`), and a round left out of the chain hands on
the model it continues on the current chain (:func:`continued_model`), never a start
model a correction superseded (:mod:`~hypertrain.challenge.rounds.chain`).

The service cannot recompute a merge (it holds no blobs): that the corrected bytes
are the recomputation is checked by anyone with ``hypertrain aggregator verify-tape``
(:func:`hypertrain.aggregator.rebase.check_correction`). The ledger is not touched by
a correction: the faulty island's value was burned when the fault was booked.
"""

from __future__ import annotations

import sqlite3
from json import loads

from hypertrain.api.models import ProvenFault
from hypertrain.challenge import facts
from hypertrain.challenge.errors import ChallengeError, ConflictError, ForbiddenError, NotFoundError
from hypertrain.challenge.ports import LedgerPort
from hypertrain.challenge.store import merge_storage, rounds_storage
from hypertrain.challenge.store.merge_storage import ProvenFaultRow
from hypertrain.protocol.citations import may_cite
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import MergeCorrection, MergeTape, RoundOpen


def book_fault(
    conn: sqlite3.Connection,
    ledger: LedgerPort,
    run_id: str,
    index: int,
    hotkey: str,
    reason: str,
    epoch: int,
) -> int:
    """Record a proven fault of round ``index`` and burn the island's unvested value
    (inside the caller's transaction); returns the amount the ledger burned."""
    merge_storage.add_proven_fault(conn, run_id, ProvenFaultRow(index, hotkey, reason, epoch))
    return ledger.record_fault(run_id, index, hotkey, reason, epoch)


def original_tape(conn: sqlite3.Connection, run_id: str, index: int) -> MergeTape | None:
    body = merge_storage.merge_body(conn, run_id, index)
    return None if body is None else MergeTape.model_validate(loads(body))


def current_tape(conn: sqlite3.Connection, run_id: str, index: int) -> MergeTape | None:
    """The round's merge as it stands: its latest correction, else the merge itself."""
    body = merge_storage.latest_correction(conn, run_id, index)
    if body is not None:
        return MergeCorrection.model_validate(loads(body)).tape
    return original_tape(conn, run_id, index)


def corrections(conn: sqlite3.Connection, run_id: str, index: int) -> list[Envelope]:
    """The round's signed corrections, oldest first (each supersedes the one before)."""
    return [
        Envelope.model_validate(loads(text))
        for text in merge_storage.correction_envelopes(conn, run_id, index)
    ]


def first_broken_link(conn: sqlite3.Connection, run_id: str) -> int | None:
    """The first merged round whose current tape does not start from a model its
    predecessor allows (a round merged on a model a correction superseded), or None."""
    rounds = merge_storage.merged_rounds(conn, run_id)
    for index in rounds[1:]:
        now = current_tape(conn, run_id, index)
        if now is not None and now.start_model_sha256 not in predecessor_models(
            conn, run_id, index
        ):
            return index
    return None


def proven_faults(conn: sqlite3.Connection, run_id: str) -> list[ProvenFault]:
    """Every proven fault of the run (the caller checked that it exists), and whether a
    rollback is due for it: its update is still in the round's current tape, or a later
    round is not yet rebased onto the corrected chain."""
    broken = first_broken_link(conn, run_id)
    out: list[ProvenFault] = []
    for row in merge_storage.proven_faults(conn, run_id):
        first = original_tape(conn, run_id, row.round)
        now = current_tape(conn, run_id, row.round)
        merged = first is not None and row.hotkey in first.included
        still = now is not None and row.hotkey in now.included
        unrebased = merged and broken is not None and broken > row.round
        out.append(
            ProvenFault(round=row.round, hotkey=row.hotkey, reason=row.reason,
                        epoch=row.epoch, merged=merged, rollback_due=still or unrebased)
        )  # fmt: skip
    return out


def _proven(conn: sqlite3.Connection, run_id: str) -> set[tuple[int, str]]:
    return set(facts.proven_faults(conn, run_id))


def predecessor_models(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The models round ``index`` may start from as the chain stands now: the current model
    of the latest merged round before it (the round's own signed start model where none
    is); where the round opened on the model that round continues (its merge was left out
    of the chain: not witnessed in time, docs/mechanism.md "Tape witnesses"), also the
    models that round may start from, as ``aggregator.chain.previous_outer`` skips it."""
    return frozenset(sha for sha, _ in _predecessors(conn, run_id, index))


def continued_model(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[str, str]:
    """The model (hash, URL) round ``index`` continues on the chain as it stands now: its
    current tape's start where that is one of its :func:`predecessor_models` (a
    correction's start, if any), else its signed start model where the chain still
    allows it, else the current model of the latest merged round before it (the round
    opened, or merged, on a model a correction has since superseded)."""
    models = _predecessors(conn, run_id, index)
    tape = current_tape(conn, run_id, index)
    opened = _opened(conn, run_id, index)[0]
    for want in (tape.start_model_sha256 if tape else None, opened):
        found = next((m for m in models if m[0] == want), None)
        if found is not None:
            return found
    return models[0]


def on_chain(conn: sqlite3.Connection, run_id: str, index: int) -> bool:
    """Whether the round's current tape starts from a model its predecessor allows (not a
    tape merged on a model a correction has since superseded; True without a tape)."""
    tape = current_tape(conn, run_id, index)
    return tape is None or tape.start_model_sha256 in predecessor_models(conn, run_id, index)


def _predecessors(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[str, str]]:
    """:func:`predecessor_models` as (hash, URL), the chain's newest model first.

    A merged round before ``index`` was left out of the chain where ``index`` opened on
    the model that round continues: its current tape's start (a correction moves it onto
    the corrected chain, as ``aggregator.chain.chain_start`` reads it)."""
    models: list[tuple[str, str]] = []
    opened = _opened(conn, run_id, index)
    while True:
        before = merge_storage.merged_before(conn, run_id, index)
        if before is None:
            return [*models, opened]
        prev = current_tape(conn, run_id, before)
        assert prev is not None
        models.append((prev.new_model_sha256, prev.new_model_url))
        if prev.start_model_sha256 != opened[0]:  # it opened on the merge's model
            return models
        index = before


def _opened(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[str, str]:
    """The start model (hash, URL) the round's coordinator-signed open record names."""
    record = rounds_storage.round_record(conn, run_id, index)
    assert record is not None  # a merged or corrected round was opened
    opened = RoundOpen.model_validate(Envelope.model_validate_json(record.open_envelope).body)
    return opened.start_model_sha256, opened.start_model_url


def wait_start(conn: sqlite3.Connection, run_id: str, index: int) -> int | None:
    """The beacon round the round's witness wait counts from (None: no tape yet): its
    tape's arrival, moved to the arrival of each correction that cites a proven fault no
    earlier correction of the round cited. So a correction restarts the wait at most once
    per proven fault of its round or an earlier one (:func:`check_correction`); one that
    only answers a contest, or cites faults already cited, does not restart it."""
    start = merge_storage.merge_received(conn, run_id, index)
    cited: set[tuple[int, str]] = set()
    for arrived, body in merge_storage.correction_arrivals(conn, run_id, index):
        faults = {(f.round, f.hotkey) for f in MergeCorrection.model_validate(loads(body)).faults}
        if faults - cited:
            start = arrived
        cited |= faults
    return start


def check_correction(
    conn: sqlite3.Connection, run_id: str, body: MergeCorrection, contested: bool = False
) -> None:
    """Refuse a correction that is not a valid next link of the round's chain.

    ``contested``: a counted tape witness disagrees with the round's current tape; a
    correction may then cite no fault (it answers the contest, and its tape is witnessed
    afresh before the round settles on it). Otherwise it must answer a proven fault."""
    index, tape = body.tape.round, body.tape
    if not body.faults and not contested:
        raise ForbiddenError(
            f"round {index}: a correction cites a proven fault, or answers a witness's"
            " contest of the current tape (it is not contested)",
            code="fault_not_proven",
        )
    now = current_tape(conn, run_id, index)
    if now is None:
        raise NotFoundError(f"round {index} of {run_id} has no merge", code="unknown_round")
    if body.supersedes_tape_sha256 != now.tape_sha256:
        raise ConflictError(
            f"round {index}'s current tape is {now.tape_sha256}, not the superseded one",
            code="superseded",
        )
    proven = _proven(conn, run_id)
    for fault in body.faults:
        if not may_cite(fault.round, index) or (fault.round, fault.hotkey) not in proven:
            raise ForbiddenError(
                f"no proven fault of {fault.hotkey} in round {fault.round} that a correction"
                f" of round {index} may cite (a rollback answers proven faults of its round"
                " or earlier ones)",
                code="fault_not_proven",
            )
    own = {h for r, h in proven if r == index}
    if own & set(tape.included):
        raise ChallengeError("the corrected tape includes a proven-faulty update", code="bad_body")
    if tape.start_model_sha256 not in predecessor_models(conn, run_id, index):
        raise ConflictError(
            "the corrected tape does not start from its predecessor's current model (nor,"
            " after a merge left out of the chain, from the model that merge's round"
            " continues)",
            code="broken_chain",
        )
    moved = bool(own & set(now.included)) or tape.start_model_sha256 != now.start_model_sha256
    if not (moved or contested) or tape.tape_sha256 == now.tape_sha256:
        raise ConflictError(f"round {index}: nothing to correct", code="nothing_to_correct")
