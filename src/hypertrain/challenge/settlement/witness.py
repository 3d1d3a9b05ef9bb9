"""Tape witnesses: signed attestations on a round's merge tape, and what they hold.

A witness is a key of its own role (:func:`~hypertrain.challenge.facts.roles.check`,
``witness``) that recomputes each merged round from its tape and the public blobs and
posts a signed ``tape-attestation``
(:func:`~hypertrain.challenge.rounds.tapes.attest`): the round, the tape's hash,
whether its recomputation agrees and, when not, the first differing field. The service
cannot recompute a merge (it holds no blobs); it only counts words.

Where the operator requires witnesses (``HYPERTRAIN_TAPE_WITNESSES`` > 0), settlement
reads :func:`tape_witnesses` as the rule's ``witnesses`` input: a merged round is booked
only once that many distinct keys agree with its *current* tape and none disagrees
(:func:`~hypertrain.challenge.tape_rule.tape_status`). Keys whose word never counts:
the aggregator keys and the signers of the round's tapes; where the operator keeps a
witness list (``HYPERTRAIN_WITNESS_HOTKEYS``), every key not on it. A contested tape
stays held and public (:func:`view`) until it is resolved (docs/mechanism.md, "Tape
witnesses"): a corrected tape supersedes it and is witnessed afresh (while the tape is
contested, a correction needs no proven fault: :func:`contested`), or the operator
drops a witness key found lying from the list, and its word stops counting. The next
round opens on a merged model only once its tape is witnessed
(:mod:`~hypertrain.challenge.rounds.chain`).
"""

from __future__ import annotations

import dataclasses
import sqlite3

from hypertrain.api.models import AttestationRecord, TapeWitnessView
from hypertrain.challenge.errors import MissingRecordError
from hypertrain.challenge.facts import RoundInputs
from hypertrain.challenge.ports import DueRound
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.settlement import rollbacks
from hypertrain.challenge.store import attestation_storage, merge_storage
from hypertrain.challenge.tape_rule import (
    Attestation,
    TapeVerdict,
    TapeWitnesses,
    tape_status,
)
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import MergeTape


def witnessed_inputs(
    conn: sqlite3.Connection,
    s: Settings,
    due_round: DueRound,
    run_id: str,
    index: int,
    inputs: RoundInputs,
) -> RoundInputs:
    """The rule's inputs with the round's witnesses; where witnesses are required, the
    round is paid on the tape they judge, its current one (a correction's, if any)."""
    tape = rollbacks.current_tape(conn, run_id, index)
    witnesses = _witnesses(conn, s, due_round, run_id, index, tape)
    if s.tape_witnesses <= 0:
        return dataclasses.replace(inputs, witnesses=witnesses)
    return dataclasses.replace(inputs, tape=tape, witnesses=witnesses)


def tape_witnesses(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str, index: int
) -> TapeWitnesses | None:
    """The rule's ``witnesses`` input for round ``index`` (None: the round has no tape)."""
    tape = rollbacks.current_tape(conn, run_id, index)
    return _witnesses(conn, s, due_round, run_id, index, tape)


def _witnesses(
    conn: sqlite3.Connection,
    s: Settings,
    due_round: DueRound,
    run_id: str,
    index: int,
    tape: MergeTape | None,
) -> TapeWitnesses | None:
    """The witnesses of ``tape``; the clock is read only for a round with a tape."""
    if tape is None:
        return None
    rows = attestation_storage.for_round(conn, run_id, index)
    return TapeWitnesses(
        required=s.tape_witnesses,
        tape_sha256=tape.tape_sha256,
        attestations=tuple(
            Attestation(r.witness, r.tape_sha256, r.agrees, r.first_difference) for r in rows
        ),
        barred=s.aggregator_hotkeys | _tape_signers(conn, run_id, index),
        allowed=s.witness_hotkeys,
        window_closed=due_round() > wait_until(conn, s, run_id, index),
    )


def wait_until(conn: sqlite3.Connection, s: Settings, run_id: str, index: int) -> int:
    """The last beacon round of the round's witness wait: from its tape's arrival, or
    from the arrival of a correction citing a fault not cited before
    (:func:`~hypertrain.challenge.settlement.rollbacks.wait_start`). A round whose tape has
    not arrived has no wait: :class:`MissingRecordError`, never a wait from round 0."""
    arrived = rollbacks.wait_start(conn, run_id, index)
    if arrived is None:
        raise MissingRecordError(
            f"round {index} of {run_id} has no merge tape yet: its witness wait has no start",
            code="no_tape",
        )
    return arrived + s.witness_wait_rounds


def status(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str, index: int
) -> TapeVerdict:
    """What the witnesses make of the round's current tape."""
    return tape_status(tape_witnesses(conn, s, due_round, run_id, index))


def contested(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str, index: int
) -> bool:
    """Whether a counted witness contests the round's current tape (a correction may
    then answer the contest without a proven fault)."""
    return status(conn, s, due_round, run_id, index).status == "contested"


def view(
    conn: sqlite3.Connection, s: Settings, due_round: DueRound, run_id: str, index: int
) -> TapeWitnessView | None:
    """The public form of the round's witness state (None: no tape yet)."""
    witnesses = tape_witnesses(conn, s, due_round, run_id, index)
    if witnesses is None:
        return None
    verdict = tape_status(witnesses)
    records = [
        AttestationRecord(
            witness=r.witness,
            tape_sha256=r.tape_sha256,
            agrees=r.agrees,
            first_difference=r.first_difference,
            counted=witnesses.counts(Attestation(r.witness, r.tape_sha256, r.agrees)),
            envelope=Envelope.model_validate_json(r.envelope),
        )
        for r in attestation_storage.for_round(conn, run_id, index)
    ]
    return TapeWitnessView(
        required=witnesses.required,
        tape_sha256=witnesses.tape_sha256,
        status=verdict.status,
        agreeing=list(verdict.agreeing),
        disagreeing=list(verdict.disagreeing),
        first_difference=verdict.first_difference,
        attestations=records,
    )


def _tape_signers(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The keys that signed the round's merge tape and its corrections."""
    merged = merge_storage.merge_envelope(conn, run_id, index)
    signers = {Envelope.model_validate_json(merged).signer} if merged else set()
    signers.update(e.signer for e in rollbacks.corrections(conn, run_id, index))
    return frozenset(signers)
