"""Signed messages that change state: join, commit, verdict, dispute, merge tape.

Each function verifies the envelope (signature, registration, expiry, body shape),
then the phase and the round's rules, and only then burns the nonce and writes in
one transaction. A late, duplicate or out-of-phase message therefore changes
nothing and gets a typed 4xx error; database uniqueness backs every "only once".
"""

from __future__ import annotations

import logging
import sqlite3

from hypertrain.api.models import (
    AdmissionAnswerAck,
    CommitAnswer,
    JoinAnswer,
    MergeAnswer,
    VerdictAnswer,
)
from hypertrain.challenge.admission import challenge
from hypertrain.challenge.admission.leave import refuse_rejoin
from hypertrain.challenge.admission.rules import check_join
from hypertrain.challenge.disputes import games, outvoted
from hypertrain.challenge.errors import (
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PhaseError,
)
from hypertrain.challenge.facts import roles
from hypertrain.challenge.facts.progress import next_round
from hypertrain.challenge.rounds import claims
from hypertrain.challenge.rounds import late as late_verdicts
from hypertrain.challenge.state import ServiceState, loads, quick_dumps
from hypertrain.challenge.store import (
    audit_storage,
    commit_storage,
    merge_storage,
    roster_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.challenge.store.commit_storage import NewCommit
from hypertrain.challenge.store.merge_storage import NewMerge
from hypertrain.challenge.store.reaudit_storage import is_faulty
from hypertrain.challenge.store.roster_storage import NewIsland
from hypertrain.challenge.store.rounds_storage import RoundRecord
from hypertrain.challenge.store.verdict_storage import NewVerdict
from hypertrain.protocol.envelope import Envelope, content_id
from hypertrain.protocol.messages import Commit, JoinRequest, MergeTape, Verdict
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)


def _stored(env: Envelope) -> tuple[str, str]:
    """(id, canonical text) of an envelope, canonicalised once."""
    raw = env.to_bytes()
    return content_id(raw), raw.decode("utf-8")


def _named(state: ServiceState, run_id: str) -> roles.NamedRoles:
    """The keys named for each role of ``run_id`` (the settings' and its manifest's)."""
    return roles.named_roles(state.settings, state.manifest(run_id))


def join(state: ServiceState, env: Envelope) -> JoinAnswer:
    verified, body = state.open_signed(env, "join", JoinRequest, registered=True)
    run_id, hotkey = env.run_id, verified.signer
    challenged = state.manifest(run_id).admission.challenge
    device_class = check_join(state.manifest(run_id), body, self_reported=not challenged)
    refuse_rejoin(state.conn, run_id, hotkey)
    roles.check(state.conn, _named(state, run_id), run_id, hotkey, "island")
    if roster_storage.membership(state.conn, run_id, hotkey) is not None:
        raise ConflictError(f"{hotkey} is already admitted to {run_id}", code="already_joined")
    if challenged:
        challenge.check_claims(state.settings, body, device_class)
        challenge.check_backoff(state.conn, state.due_round, run_id, hotkey)
        with transaction(state.conn):
            state.burn(env)
            return challenge.open_challenge(state, run_id, hotkey, body, device_class)
    with transaction(state.conn):
        state.burn(env)
        return admit(state, run_id, hotkey, body, device_class)


def admit(
    state: ServiceState, run_id: str, hotkey: str, body: JoinRequest, device_class: str
) -> JoinAnswer:
    """Add an island to the roster (inside the caller's transaction); the join answer."""
    first_round = next_round(state.conn, run_id)
    probation_until = first_round + state.manifest(run_id).audit.probation_rounds
    roster_storage.add_island(
        state.conn,
        NewIsland(
            run_id=run_id,
            hotkey=hotkey,
            admitted_beacon_round=state.current_round(),
            first_round=first_round,
            probation_until_round=probation_until,
            device_class=device_class,
            num_devices=len(body.devices),
            join_body=quick_dumps(body.model_dump(mode="json")),
            layout=quick_dumps(body.layout.model_dump(mode="json")),
        ),
    )
    state.count("joins_admitted")
    manifest = state.manifest(run_id)
    return JoinAnswer(
        admitted=True,
        run_id=run_id,
        hotkey=hotkey,
        first_round=first_round,
        probation_until_round=probation_until,
        layout=body.layout,
        samples_per_round=manifest.round.island_samples(body.layout),
    )


def _round_row(state: ServiceState, run_id: str, index: int) -> RoundRecord:
    row = rounds_storage.round_record(state.conn, run_id, index)
    if row is None:
        raise NotFoundError(f"round {index} of {run_id} is not open", code="unknown_round")
    return row


def island_tokens(state: ServiceState, round_row: RoundRecord, hotkey: str) -> int:
    """The tokens an island trains in a round: H × samples per step × (seq_len - 1).

    Its layout is the one the signed round-open record names; a commit must claim
    exactly this many (a round is all H steps on the whole assignment, or nothing).
    """
    manifest = state.manifest(round_row.run_id)
    layout = state.layout_of(round_row.run_id, round_row.round, round_row.open_envelope, hotkey)
    return manifest.round.island_samples(layout) * (manifest.data.seq_len - 1)


def _extend_probation(state: ServiceState, run_id: str, hotkey: str, index: int) -> None:
    """Probation counts the rounds an island took part in, not the rounds since it joined.

    An island that sat out rounds of its probation is still in probation for as many of
    the rounds it commits to as it has not yet served: it is audited (and its rewards held)
    in each of its first ``probation_rounds`` committed rounds, whenever they come.
    """
    served = commit_storage.served_rounds(state.conn, run_id, hotkey, index)
    left = state.manifest(run_id).audit.probation_rounds - served
    if left > 0:
        roster_storage.extend_probation(state.conn, run_id, hotkey, index + left)


def commit(state: ServiceState, env: Envelope) -> CommitAnswer:
    verified, body = state.open_signed(env, "commit", Commit, registered=True)
    run_id, hotkey = env.run_id, verified.signer
    row = _round_row(state, run_id, body.round)
    # fail closed: the deadline passes by the clock, not the poll; the commit is stamped
    # with that round too, so an early close selects by a round no committer could know
    due = state.due_round()
    if row.phase != "train" or due > row.commit_deadline:
        why = (
            f"was beacon round {row.commit_deadline} (now {due})"
            if due > row.commit_deadline
            else f"is beacon round {row.commit_deadline}, but the round is in its "
            f"{row.phase} phase, not train (it closes early once every awaited island committed)"
        )
        raise PhaseError(f"commit deadline of round {body.round} {why}", code="late")
    if hotkey not in state.roster_of(run_id, body.round, row.open_envelope):
        raise ForbiddenError(
            f"{hotkey} is not in the roster of round {body.round}", code="not_in_roster"
        )
    segments = state.manifest(run_id).round.num_segments
    if body.leaf_count != segments + 1:
        raise ChallengeError(
            f"leaf_count is {body.leaf_count}, a round has {segments + 1} checkpoint leaves",
            code="bad_body",
        )
    budget = island_tokens(state, row, hotkey)
    if body.tokens != budget:
        raise ChallengeError(
            f"commit claims {body.tokens} tokens, the island's layout trains exactly {budget}"
            f" in round {body.round}",
            code="bad_tokens",
        )
    if commit_storage.has_commit(state.conn, run_id, body.round, hotkey):
        raise ConflictError(f"{hotkey} already committed to round {body.round}", code="duplicate")
    commit_id, env_text = _stored(env)
    with transaction(state.conn):
        state.burn(env)
        _extend_probation(state, run_id, hotkey, body.round)
        commit_storage.add_commit(
            state.conn,
            NewCommit(
                run_id=run_id,
                round=body.round,
                hotkey=hotkey,
                tokens=body.tokens,
                update_bytes=body.update_bytes,
                train_loss=body.train_loss,
                body=quick_dumps(body.model_dump(mode="json")),
                envelope=env_text,
                accepted_beacon_round=due,
            ),
        )
    state.count("commits_accepted")
    return CommitAnswer(
        accepted=True, run_id=run_id, round=body.round, hotkey=hotkey, commit_id=commit_id
    )


def verdict(state: ServiceState, env: Envelope) -> VerdictAnswer:
    verified, body = state.open_signed(
        env, "verdict", Verdict, registered=False, allowed=state.settings.worker_hotkeys
    )
    run_id = env.run_id
    roles.check(state.conn, _named(state, run_id), run_id, verified.signer, "verdict")
    if is_faulty(state.conn, run_id, verified.signer):
        raise ForbiddenError(
            f"auditor {verified.signer} signed a verdict a dispute overturned; its verdicts"
            " no longer count in this run",
            code="faulty_auditor",
        )
    row = _round_row(state, run_id, body.round)
    now = state.due_round()  # fail closed: the window closes by the clock, not the poll
    in_window = (
        row.phase == "audit" and row.audit_close_round is not None and now < row.audit_close_round
    )
    late = row.phase in ("merge", "settle", "final") and late_verdicts.accepts(
        state, run_id, body.round, body.hotkey, verified.signer
    )
    if not (in_window or late):
        raise PhaseError(
            f"round {body.round} is not accepting verdicts (phase {row.phase}, beacon round {now})"
        )
    segments = audit_storage.audit_segments(state.conn, run_id, body.round, body.hotkey)
    if segments is None:
        raise NotFoundError(
            f"{body.hotkey} was not selected for audit in round {body.round}", code="no_assignment"
        )
    extra = sorted(set(body.segments) - set(loads(segments)))
    if extra or not body.segments:
        raise ChallengeError(f"segments {extra or '[]'} are not the assigned ones", code="bad_body")
    claims.check_mismatch(body, state.manifest(run_id).round.num_segments)
    verdict_id, env_text = _stored(env)
    try:
        with transaction(state.conn):
            state.burn(env)
            if late:  # the first late verdict opens the assignment's late panel
                late_verdicts.admit(state, run_id, body.round, body.hotkey)
            verdict_storage.add_verdict(
                state.conn,
                NewVerdict(
                    verdict_id=verdict_id,
                    run_id=run_id,
                    round=body.round,
                    hotkey=body.hotkey,
                    auditor=verified.signer,
                    result=body.result,
                    body=quick_dumps(body.model_dump(mode="json")),
                    envelope=env_text,
                    received_beacon_round=now,
                ),
            )
            if late:  # counted once a majority of the late jury judged it
                final = row.phase == "final"
                late_verdicts.decided(state, run_id, body.round, body.hotkey, final)
    except sqlite3.IntegrityError:
        raise ConflictError(
            f"{verified.signer} already judged {body.hotkey} in round {body.round}",
            code="duplicate",
        ) from None
    state.count(f"verdicts_{body.result}")
    games.on_verdict(
        state.books(), state.manifest(run_id), run_id, body.round, body.hotkey,
        verified.signer, body.result,
    )  # fmt: skip
    with transaction(state.conn):  # a lie the judges' majority outvoted counts against it
        outvoted.bar_outvoted(state.conn, state.settings, run_id, body.round, body.hotkey, now)
    return VerdictAnswer(accepted=True, verdict_id=verdict_id)


def merge(state: ServiceState, env: Envelope) -> MergeAnswer:
    verified, body = state.open_signed(
        env, "merge-tape", MergeTape, registered=False
    )  # the signer must be a named aggregator key (roles.check), listed as a worker or not
    run_id = env.run_id
    roles.check(state.conn, _named(state, run_id), run_id, verified.signer, "merge-tape")
    row = _round_row(state, run_id, body.round)
    if row.phase != "merge":
        raise PhaseError(f"round {body.round} is in phase {row.phase}, not merge")
    if body.start_model_sha256 != row.start_model_sha256:
        raise ChallengeError("start_model_sha256 is not the round's start model", code="bad_body")
    claims.check_tape(state.conn, run_id, body)
    _merge_id, env_text = _stored(env)
    with transaction(state.conn):
        state.burn(env)
        merge_storage.add_merge(
            state.conn,
            NewMerge(
                run_id=run_id,
                round=body.round,
                aggregator=verified.signer,
                new_model_sha256=body.new_model_sha256,
                eval_loss=body.eval_loss,
                body=quick_dumps(body.model_dump(mode="json")),
                envelope=env_text,
                received_beacon_round=state.current_round(),
            ),
        )
        rounds_storage.set_phase(state.conn, run_id, body.round, "settle")
    # nothing is paid yet: the round settles once ready_to_settle holds
    return MergeAnswer(accepted=True, round=body.round, phase="settle", paid={})


def admission_answer(state: ServiceState, env: Envelope) -> AdmissionAnswerAck:
    """An island's answer to its admission challenge (:mod:`.challenge`)."""
    return challenge.answer(state, env)


def admission_check(state: ServiceState, env: Envelope) -> JoinAnswer:
    """A worker's reference hash: admits the island on a match (:mod:`.challenge`)."""
    return challenge.check(
        state, env, lambda run_id, hotkey, body, cls: admit(state, run_id, hotkey, body, cls)
    )
