"""Competition mode, the signed messages: create, commit, reveal and score.

Same discipline as the training intake: verify the envelope (signature, expiry,
registration), then the competition's rules, and only then burn the nonce and write
in one transaction, so a refused message changes nothing. The envelope's ``run_id``
is the competition id; nonces share the service's replay table.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from hypertrain.challenge.errors import (
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PhaseError,
)
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.state import ServiceState, dumps
from hypertrain.challenge.store import competition_storage, cycle_storage, rounds_storage
from hypertrain.competition.messages import (
    COMMIT_DOMAIN,
    REVEAL_DOMAIN,
    SCORE_DOMAIN,
    SPEC_DOMAIN,
    CommitAccepted,
    CompeteCommit,
    CompeteReveal,
    CompeteScore,
    CompetitionCreated,
    CycleTask,
    RevealAccepted,
    ScoreAccepted,
)
from hypertrain.competition.pool import PoolError, decode_pool
from hypertrain.competition.spec import CompetitionSpec, check_score_window
from hypertrain.competition.submission import SubmissionError, commitment, model_hash
from hypertrain.protocol.envelope import Envelope, VerifiedEnvelope
from hypertrain.protocol.errors import DeadlineError
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)
BodyT = TypeVar("BodyT", bound=BaseModel)


class SpecRecord(BaseModel):
    """The body of the coordinator-signed ``competition`` envelope."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: CompetitionSpec


def spec_of(conn: sqlite3.Connection, competition_id: str) -> CompetitionSpec:
    text = competition_storage.spec_json(conn, competition_id)
    if text is None:
        raise NotFoundError(
            f"competition {competition_id!r} does not exist", code="unknown_competition"
        )
    return CompetitionSpec.model_validate_json(text)


def spec_envelope(conn: sqlite3.Connection, competition_id: str) -> Envelope:
    """The coordinator-signed ``competition`` envelope of a competition's spec."""
    spec_of(conn, competition_id)
    text = competition_storage.spec_envelope(conn, competition_id)
    assert text is not None  # the competition exists
    return Envelope.model_validate_json(text)


def _evaluators_named(s: Settings, spec: CompetitionSpec) -> None:
    if not spec.evaluators and not s.evaluator_hotkeys:
        raise ChallengeError(
            "nobody could score this competition: name its evaluators in the spec"
            ' ("evaluators": [SS58, ...]) or start the service with'
            " HYPERTRAIN_EVALUATOR_HOTKEYS set to the evaluators' SS58 addresses",
            code="no_evaluators",
        )


def create(state: ServiceState, doc: dict[str, JsonValue], pool_b64: str) -> CompetitionCreated:
    """Store a competition, its coordinator-signed spec, its secret pool and its account."""
    try:
        spec = CompetitionSpec.model_validate({**doc, "coordinator": state.coordinator})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise ChallengeError(f"spec.{where}: {first['msg']}", code="bad_spec") from None
    _evaluators_named(state.settings, spec)
    try:  # an evaluator's scores must fit the window on this service's beacon
        check_score_window(spec, state.beacon_period_s())
    except DeadlineError as exc:
        raise ChallengeError(f"spec.{exc}", code="bad_spec") from None
    try:
        pool = decode_pool(pool_b64, spec)
    except PoolError as exc:
        raise ChallengeError(str(exc), code="bad_pool") from None
    cid = spec.competition_id
    if rounds_storage.manifest_json(state.conn, cid) is not None:
        raise ConflictError(f"{cid!r} is already the id of a training run")
    now = state.current_round()
    envelope = state.sign(cid, SPEC_DOMAIN, SpecRecord(spec=spec))
    try:
        with transaction(state.conn):
            competition_storage.add_competition(
                state.conn,
                competition_storage.NewCompetition(
                    competition_id=cid,
                    spec_json=spec.model_dump_json(),
                    spec_envelope=dumps(envelope.model_dump()),
                    spec_digest=spec.digest(),
                    start_beacon_round=now,
                    created_at=time.time(),
                ),
            )
            state.ledger.create_run(
                cid,
                pool_per_round=spec.reward.pool_per_cycle,
                vesting_rounds=spec.reward.vesting_rounds,
            )
            _write_pool(state.settings, cid, pool)
    except sqlite3.IntegrityError:
        raise ConflictError(f"competition {cid!r} already exists") from None
    log.info("created competition %s (spec %s)", cid, spec.digest())
    return CompetitionCreated(
        competition_id=cid,
        spec_sha256=spec.digest(),
        start_beacon_round=now,
        spec_envelope=envelope.model_dump(),
    )


def _write_pool(s: Settings, cid: str, pool: np.ndarray[Any, Any]) -> None:
    path = s.state_dir / "competitions" / f"{cid}.pool.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npy")
    np.save(partial, pool, allow_pickle=False)
    partial.replace(path)


def _open(
    state: ServiceState, env: Envelope, domain: str, model: type[BodyT], *, registered: bool
) -> tuple[VerifiedEnvelope, BodyT]:
    spec_of(state.conn, env.run_id)
    return state.verify_signed(env, domain, model, registered=registered)


@contextmanager
def _recorded(state: ServiceState, env: Envelope, duplicate: str) -> Iterator[None]:
    """One transaction that burns ``env``'s nonce and writes its row (the body of the
    ``with``); a row the table already holds (its unique key) is a ``duplicate``
    :class:`ConflictError` saying ``duplicate``, and nothing is written."""
    try:
        with transaction(state.conn):
            state.burn(env)
            yield
    except sqlite3.IntegrityError:
        raise ConflictError(duplicate, code="duplicate") from None


def commit(state: ServiceState, env: Envelope) -> CommitAccepted:
    """Record a commitment at the current beacon round (that round orders submissions)."""
    verified, body = _open(state, env, COMMIT_DOMAIN, CompeteCommit, registered=True)
    spec = spec_of(state.conn, env.run_id)
    now = state.due_round()
    commit_id = env.content_id()
    with _recorded(state, env, "this commitment was already recorded"):
        competition_storage.add_commit(
            state.conn,
            competition_storage.NewCommit(
                competition_id=env.run_id,
                commitment=body.commitment,
                hotkey=verified.signer,
                commit_beacon_round=now,
                commit_id=commit_id,
                envelope=dumps(env.model_dump()),
            ),
        )
    return CommitAccepted(
        commitment=body.commitment,
        hotkey=verified.signer,
        commit_beacon_round=now,
        eligible_round=now + spec.cycle.eligibility_delay_rounds,
    )


def reveal(state: ServiceState, env: Envelope) -> RevealAccepted:
    """Reveal a committed model: the file list must hash to the committed model hash."""
    verified, body = _open(state, env, REVEAL_DOMAIN, CompeteReveal, registered=True)
    try:
        computed = model_hash(body.files)
        expected = commitment(body.model_sha256, verified.signer)
    except SubmissionError as exc:
        raise ChallengeError(str(exc), code="bad_submission") from None
    if computed != body.model_sha256:
        raise ChallengeError(
            f"the file list hashes to {computed}, not to model_sha256", code="bad_submission"
        )
    row = competition_storage.commit_of(state.conn, env.run_id, expected)
    if row is None or row.hotkey != verified.signer:
        raise NotFoundError(
            f"{verified.signer} has no commitment for model {body.model_sha256}",
            code="no_commitment",
        )
    if row.model_sha256 is not None:
        raise ConflictError("this commitment was already revealed", code="duplicate")
    if state.due_round() <= row.commit_beacon_round:
        # A copy is committed after the original's reveal; revealing strictly after
        # the commit round puts every copy's commitment in a later round, so "the
        # earliest commitment of a model" never ties between the original and a copy.
        raise PhaseError(
            f"reveal after beacon round {row.commit_beacon_round}, the commit's round",
            code="reveal_too_early",
        )
    files = json.dumps([f.model_dump() for f in body.files], sort_keys=True)
    with transaction(state.conn):
        state.burn(env)
        competition_storage.reveal(
            state.conn,
            competition_storage.Reveal(
                competition_id=env.run_id,
                commitment=expected,
                model_sha256=body.model_sha256,
                files=files,
                base_url=body.base_url,
                envelope=dumps(env.model_dump()),
                revealed_beacon_round=state.due_round(),
            ),
        )
    return RevealAccepted(commitment=expected, model_sha256=body.model_sha256, revealed=True)


def _evaluators(s: Settings, spec: CompetitionSpec) -> frozenset[str]:
    """The keys that may score: the spec's, else the evaluator role's (never the auditors)."""
    return frozenset(spec.evaluators) if spec.evaluators else s.evaluator_hotkeys


def score(state: ServiceState, env: Envelope) -> ScoreAccepted:
    """An evaluator's page losses for one model of an open cycle."""
    verified, body = _open(state, env, SCORE_DOMAIN, CompeteScore, registered=False)
    spec = spec_of(state.conn, env.run_id)
    if verified.signer not in _evaluators(state.settings, spec):
        where = (
            "the spec's evaluators"
            if spec.evaluators
            else "HYPERTRAIN_EVALUATOR_HOTKEYS (the spec names no evaluators)"
        )
        raise ForbiddenError(
            f"{verified.signer} is not an evaluator of this competition; add it to {where}"
        )
    cycle = cycle_storage.cycle(state.conn, env.run_id, body.cycle)
    if cycle is None:
        raise NotFoundError(f"cycle {body.cycle} is not open", code="unknown_cycle")
    if cycle.closed or state.due_round() > cycle.score_deadline:
        raise PhaseError(f"cycle {body.cycle} no longer takes scores", code="late")
    _check_score(CycleTask.model_validate_json(cycle.task), body)
    with _recorded(state, env, "this evaluator already scored that model"):
        cycle_storage.add_score(
            state.conn,
            cycle_storage.NewScore(
                competition_id=env.run_id,
                cycle=body.cycle,
                model_sha256=body.model_sha256,
                evaluator=verified.signer,
                losses_f32=body.losses_f32,
                envelope=dumps(env.model_dump()),
                received_beacon_round=state.due_round(),
            ),
        )
    return ScoreAccepted(accepted=True, cycle=body.cycle, model_sha256=body.model_sha256)


def _check_score(task: CycleTask, body: CompeteScore) -> None:
    if body.pages_key != task.pages_key:
        raise ChallengeError("pages_key is not this cycle's", code="bad_score")
    if body.model_sha256 not in {m.model_sha256 for m in task.listed()}:
        raise ChallengeError("that model is not evaluated in this cycle", code="bad_score")
    if len(body.losses()) != len(task.pages):
        raise ChallengeError(
            f"{len(body.losses())} losses for {len(task.pages)} pages", code="bad_score"
        )
