"""Tape witnesses: signed attestations on a round's merge tape, and what they hold.

A witness is a key of its own role (:func:`~hypertrain.challenge.facts.roles.check`,
``witness``) that recomputes each merged round from its tape and the public blobs and
posts a signed ``tape-attestation`` (:func:`attest`): the round, the tape's hash,
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
import hashlib
import sqlite3

from hypertrain.api.models import AttestationAnswer, AttestationRecord, TapeWitnessView
from hypertrain.challenge.errors import ConflictError, MissingRecordError, PhaseError
from hypertrain.challenge.facts import RoundInputs, roles
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.settlement import rollbacks
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import attestation_storage, merge_storage
from hypertrain.challenge.tape_rule import (
    Attestation,
    TapeVerdict,
    TapeWitnesses,
    tape_status,
)
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import MergeTape, TapeAttestation
from hypertrain.protocol.sqlite import transaction


def attest(state: ServiceState, env: Envelope) -> AttestationAnswer:
    """A witness's signed ``tape-attestation`` on the round's current tape."""
    verified, body = state.open_signed(
        env, "tape-attestation", TapeAttestation, registered=True,
        allowed=state.settings.witness_hotkeys,
    )  # fmt: skip
    run_id, signer = env.run_id, verified.signer
    named = roles.named_roles(state.settings, state.manifest(run_id))
    roles.check(state.conn, named, run_id, signer, "witness")
    tape = rollbacks.current_tape(state.conn, run_id, body.round)
    if tape is None:
        raise PhaseError(f"round {body.round} of {run_id} has no merge tape to attest")
    if body.tape_sha256 != tape.tape_sha256:
        raise ConflictError(
            f"tape {body.tape_sha256[:16]}… is not the current tape of round {body.round}",
            code="superseded",
        )
    raw = env.to_bytes()
    row = attestation_storage.AttestationRow(
        run_id, body.round, body.tape_sha256, signer, body.agrees, body.first_difference,
        raw.decode("utf-8"), state.current_round(),
    )  # fmt: skip
    with transaction(state.conn):
        state.burn(env)
        if not attestation_storage.add(state.conn, row):
            raise ConflictError(f"{signer} already attested this tape", code="duplicate")
    state.count("tape_attestations_agree" if body.agrees else "tape_attestations_disagree")
    return AttestationAnswer(
        accepted=True, round=body.round, tape_sha256=body.tape_sha256, witness=signer,
        attestation_id=hashlib.sha256(raw).hexdigest(),
        status=status(state, run_id, body.round).status,
    )  # fmt: skip


def witnessed_inputs(
    state: ServiceState, run_id: str, index: int, inputs: RoundInputs
) -> RoundInputs:
    """The rule's inputs with the round's witnesses; where witnesses are required, the
    round is paid on the tape they judge, its current one (a correction's, if any)."""
    tape = rollbacks.current_tape(state.conn, run_id, index)
    witnesses = _witnesses(state, run_id, index, tape)
    if state.settings.tape_witnesses <= 0:
        return dataclasses.replace(inputs, witnesses=witnesses)
    return dataclasses.replace(inputs, tape=tape, witnesses=witnesses)


def tape_witnesses(state: ServiceState, run_id: str, index: int) -> TapeWitnesses | None:
    """The rule's ``witnesses`` input for round ``index`` (None: the round has no tape)."""
    return _witnesses(state, run_id, index, rollbacks.current_tape(state.conn, run_id, index))


def _witnesses(
    state: ServiceState, run_id: str, index: int, tape: MergeTape | None
) -> TapeWitnesses | None:
    if tape is None:
        return None
    rows = attestation_storage.for_round(state.conn, run_id, index)
    return TapeWitnesses(
        required=state.settings.tape_witnesses,
        tape_sha256=tape.tape_sha256,
        attestations=tuple(
            Attestation(r.witness, r.tape_sha256, r.agrees, r.first_difference) for r in rows
        ),
        barred=state.settings.aggregator_hotkeys | _tape_signers(state.conn, run_id, index),
        allowed=state.settings.witness_hotkeys,
        window_closed=state.due_round() > wait_until(state.conn, state.settings, run_id, index),
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


def status(state: ServiceState, run_id: str, index: int) -> TapeVerdict:
    """What the witnesses make of the round's current tape."""
    return tape_status(tape_witnesses(state, run_id, index))


def contested(state: ServiceState, run_id: str, index: int) -> bool:
    """Whether a counted witness contests the round's current tape (a correction may
    then answer the contest without a proven fault)."""
    return status(state, run_id, index).status == "contested"


def view(state: ServiceState, run_id: str, index: int) -> TapeWitnessView | None:
    """The public form of the round's witness state (None: no tape yet)."""
    witnesses = tape_witnesses(state, run_id, index)
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
        for r in attestation_storage.for_round(state.conn, run_id, index)
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
