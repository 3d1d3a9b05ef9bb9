"""Signed messages on a merged round's tape: a witness's attestation, a merge correction.

Each verifies the envelope, checks the signer's role and the round's current tape
(:mod:`~hypertrain.challenge.settlement.witness`,
:func:`~hypertrain.challenge.settlement.rollbacks.check_correction`), and only then
burns the nonce and stores the message in one transaction.
"""

from __future__ import annotations

import hashlib

from hypertrain.api.models import AttestationAnswer, CorrectionAnswer
from hypertrain.challenge.errors import ConflictError, PhaseError
from hypertrain.challenge.facts import roles
from hypertrain.challenge.settlement import rollbacks, witness
from hypertrain.challenge.state import ServiceState, quick_dumps
from hypertrain.challenge.store import attestation_storage, merge_storage
from hypertrain.challenge.store.merge_storage import NewCorrection
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import MergeCorrection, TapeAttestation
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
    verdict = witness.status(state.conn, state.settings, state.due_round, run_id, body.round)
    return AttestationAnswer(
        accepted=True, round=body.round, tape_sha256=body.tape_sha256, witness=signer,
        attestation_id=hashlib.sha256(raw).hexdigest(), status=verdict.status,
    )  # fmt: skip


def accept_correction(state: ServiceState, env: Envelope) -> CorrectionAnswer:
    """A worker's signed ``merge-correction``: store it as the round's current tape (while
    a witness contests that tape, :func:`~hypertrain.challenge.settlement.witness.contested`,
    it may cite no proven fault)."""
    verified, body = state.open_signed(
        env, "merge-correction", MergeCorrection, registered=False
    )  # fmt: skip
    run_id, index = env.run_id, body.tape.round
    named = roles.named_roles(state.settings, state.manifest(run_id))
    roles.check(state.conn, named, run_id, verified.signer, "merge-tape")  # a correction is a tape
    contested = witness.contested(state.conn, state.settings, state.due_round, run_id, index)
    rollbacks.check_correction(state.conn, run_id, body, contested)
    raw = env.to_bytes()
    with transaction(state.conn):
        state.burn(env)
        merge_storage.add_correction(
            state.conn,
            NewCorrection(run_id, index, body.tape.tape_sha256, body.supersedes_tape_sha256,
                          quick_dumps(body.model_dump(mode="json")), raw.decode("utf-8"),
                          state.current_round()),
        )  # fmt: skip
    state.count("merge_corrections")
    return CorrectionAnswer(
        accepted=True, round=index, tape_sha256=body.tape.tape_sha256,
        supersedes_tape_sha256=body.supersedes_tape_sha256,
        correction_id=hashlib.sha256(raw).hexdigest(), signer=verified.signer,
    )  # fmt: skip
