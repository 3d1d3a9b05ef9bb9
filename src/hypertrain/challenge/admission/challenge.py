"""The admission challenge: prove the devices compute, rather than report a hash.

With ``admission.challenge`` on in the manifest, a join request that passes the
report checks does not admit the island; it opens a challenge instead:

1. The workload seed comes from beacon round ``s = join round + delay_rounds``, which
   does not exist when the join is accepted: nobody can precompute the answer.
   :func:`status` shows the seed once the service has verified round ``s``.
2. The island runs the fixed self-check workload with that seed on every device and
   posts one hash per device (``admission-answer``) by its deadline round: ``s`` plus
   the deadline of its declared device class for the memory it claims
   (:mod:`.deadlines`), never more than the manifest's ``answer_window_rounds``. The
   window is sized (``workload_steps``) to one device's throughput, so a device
   answering for another, or for more devices than it has, misses it. A late answer
   refuses the island.
   With the hashes it posts, per device, the memory proof's answers: walks over a table
   of the size the device claims (``memory_bytes``), seeded per device from the same
   seed (:mod:`hypertrain.trainer.memproof`).
3. A worker of the same device class recomputes the reference hash for that seed, and
   the memory answers of a sample of (device, query) pairs drawn from the beacon round
   after the answer arrived (:func:`hypertrain.protocol.memproof.check_sample`), and
   posts both (``admission-check``). The island is admitted, exactly as a plain join
   admits, only if every device's hash equals the reference and every sampled memory
   answer equals the worker's; otherwise it is refused. The roster records the proven
   bytes, which is the only memory figure the service keeps for an island.

A refused island, or one whose challenge expired unanswered, may join again (a new
challenge with a new seed), but not at once: each refusal doubles the rounds it waits
(``backoff``: ``admission_backoff_rounds × 2^(refusals − 1)``, at most ``2^10`` times the
base), so joining again and again costs the island time, not the worker work. Before any
of this, a device's claim above its class's cap (:mod:`.deadlines`) is refused at the join
(``claim_too_large``): the worker's check is sized by the claim.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from hypertrain.api.models import (
    AdmissionAnswerAck,
    AdmissionChallengePublic,
    AdmissionStatus,
    JoinAnswer,
    PendingAdmission,
)
from hypertrain.challenge.admission.rules import challenge_seed, proven_memory_problem
from hypertrain.challenge.deadlines import Deadline
from hypertrain.challenge.errors import (
    AdmissionError,
    ChallengeError,
    ConflictError,
    NotFoundError,
    PhaseError,
)
from hypertrain.challenge.ports import BeaconRound, BeaconSource, DueRound
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.state import ServiceState, loads, quick_dumps
from hypertrain.challenge.store import admission_storage, roster_storage, rounds_storage
from hypertrain.challenge.store.admission_storage import ChallengeRow, ChallengeStatus, NewChallenge
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.memproof import QUERIES, check_sample, table_shape
from hypertrain.protocol.messages import AdmissionAnswer, AdmissionCheck, JoinRequest
from hypertrain.protocol.sqlite import transaction

# Admits an island (run, hotkey, join request, device class) and answers its join.
Admit = Callable[[str, str, JoinRequest, str], JoinAnswer]
# The backoff after the n-th refusal is base × 2^(n − 1), n capped here.
MAX_BACKOFF_DOUBLINGS = 10


def check_claims(s: Settings, body: JoinRequest, device_class: str) -> None:
    """Refuse (``claim_too_large``) a device claiming more than its class's cap."""
    cap = s.admission_deadlines.max_claim_bytes(device_class)
    for device in body.devices:
        if device.memory_bytes > cap:
            raise AdmissionError(
                f"device {device.index} claims {device.memory_bytes} bytes; device class"
                f" {device_class!r} may claim at most {cap}",
                code="claim_too_large",
            )


def check_backoff(conn: sqlite3.Connection, due_round: DueRound, run_id: str, hotkey: str) -> None:
    """Refuse (``backoff``) a join again before the last refusal's backoff has passed."""
    row = admission_storage.challenge(conn, run_id, hotkey)
    now = due_round()
    if row is not None and row.status == "refused" and now < row.retry_round:
        raise ConflictError(
            f"{hotkey} was refused {row.refusals} time(s); it may join again from round"
            f" {row.retry_round} (now {now})",
            code="backoff",
        )


def open_challenge(
    state: ServiceState, run_id: str, hotkey: str, body: JoinRequest, device_class: str
) -> JoinAnswer:
    """Record a pending challenge for a join request (replacing a refused one)."""
    spec = state.manifest(run_id).admission
    now = state.due_round()
    row = admission_storage.challenge(state.conn, run_id, hotkey)
    expired = row is not None and row.status == "pending" and now > row.deadline_round
    if row is not None and row.status in ("pending", "answered") and not expired:
        raise ConflictError(f"{hotkey} already has an open admission challenge", code="duplicate")
    seed_round = now + spec.delay_rounds
    allowed = _deadline(state, device_class, [d.memory_bytes for d in body.devices])
    deadline = seed_round + min(spec.answer_window_rounds, allowed.rounds)
    refusals = row.refusals if row is not None else 0  # the backoff outlives a row
    admission_storage.replace_challenge(
        state.conn,
        NewChallenge(
            run_id=run_id,
            hotkey=hotkey,
            device_class=device_class,
            join_body=quick_dumps(body.model_dump(mode="json")),
            join_beacon_round=now,
            seed_beacon_round=seed_round,
            deadline_round=deadline,
            refusals=refusals,
        ),
    )
    return JoinAnswer(
        admitted=False,
        run_id=run_id,
        hotkey=hotkey,
        challenge=AdmissionChallengePublic(
            seed_beacon_round=seed_round,
            answer_deadline_round=deadline,
            workload_steps=spec.workload_steps,
            devices=len(body.devices),
            deadline_tier=allowed.tier,
        ),
    )


def _deadline(state: ServiceState, device_class: str, claims: list[int]) -> Deadline:
    """The deadline the service's table gives this class and these claims."""
    return state.settings.admission_deadlines.deadline(
        device_class, claims, state.beacon_period_s()
    )


def status(state: ServiceState, run_id: str, hotkey: str) -> AdmissionStatus:
    """The island's challenge: its seed once the seed round is verified, and its status."""
    state.manifest(run_id)
    row = _require(state.conn, run_id, hotkey)
    seed = _seed(state.conn, state.beacon, state.current, row)
    return AdmissionStatus(
        run_id=run_id,
        hotkey=hotkey,
        status=row.status,
        reason=row.reason,
        seed_beacon_round=row.seed_beacon_round,
        answer_deadline_round=row.deadline_round,
        workload_steps=state.manifest(run_id).admission.workload_steps,
        seed=seed,
        memory_claims=_claims(row),
        deadline_tier=_deadline(state, row.device_class, _claims(row)).tier,
    )


def answer(state: ServiceState, env: Envelope) -> AdmissionAnswerAck:
    """The island's per-device hashes; refused (and the island with it) when late."""
    verified, body = state.open_signed(env, "admission-answer", AdmissionAnswer, registered=True)
    run_id, hotkey = env.run_id, verified.signer
    state.manifest(run_id)
    row = _require(state.conn, run_id, hotkey)
    if row.status != "pending":
        code = "duplicate" if row.status == "answered" else "closed"
        raise ConflictError(f"challenge is {row.status}, not awaiting an answer", code=code)
    if body.seed_beacon_round != row.seed_beacon_round:
        raise ChallengeError("answer is for another seed round", code="wrong_seed")
    seed = _seed(state.conn, state.beacon, state.current, row)
    if seed is None:
        raise PhaseError("the seed round is not public yet", code="no_seed")
    now = state.due_round()
    if now > row.deadline_round:
        with transaction(state.conn):
            state.burn(env)
            _close(
                state.conn,
                state.settings,
                state.due_round,
                run_id,
                hotkey,
                "refused",
                f"late: answer at round {now}, after the"
                f" deadline {row.deadline_round} of device class {row.device_class!r}",
            )
        raise PhaseError(
            f"answer deadline {row.deadline_round} of device class {row.device_class!r}"
            f" passed (now {now})",
            code="late",
        )
    _check_shape(body, len(_claims(row)))
    with transaction(state.conn):
        state.burn(env)
        admission_storage.record_answer(
            state.conn, run_id, hotkey, quick_dumps(body.hashes), quick_dumps(body.memory), now
        )
    return AdmissionAnswerAck(accepted=True, status="answered")


def _check_shape(body: AdmissionAnswer, devices: int) -> None:
    """One hash and one list of ``QUERIES`` memory answers per device."""
    if len(body.hashes) != devices:
        raise ChallengeError(f"{len(body.hashes)} hashes for {devices} devices", code="bad_body")
    if len(body.memory) != devices or any(len(m) != QUERIES for m in body.memory):
        raise ChallengeError(
            f"memory answers must be {QUERIES} per device for {devices} devices",
            code="bad_body",
        )


def _claims(row: ChallengeRow) -> list[int]:
    """Bytes each device of the join claims (and must prove)."""
    return [int(d["memory_bytes"]) for d in loads(row.join_body)["devices"]]


def _sample(
    conn: sqlite3.Connection, beacon: BeaconSource, current: BeaconRound | None, row: ChallengeRow
) -> list[tuple[int, int]] | None:
    """The (device, query) pairs to recompute, from the beacon round after the answer;
    None until that round is verified."""
    assert row.answered_round is not None  # only an answered challenge has a sample
    randomness = _randomness(conn, beacon, current, row.answered_round + 1)
    if randomness is None:
        return None
    return check_sample(randomness, row.hotkey, len(_claims(row)))


def pending(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    beacon: BeaconSource,
    current: BeaconRound | None,
    run_id: str,
) -> list[PendingAdmission]:
    """Answered challenges awaiting a worker's check, once their sample round is public
    (``manifest``: the run's; ``current``: the latest verified beacon round)."""
    rows = admission_storage.answered(conn, run_id)
    spec = manifest.admission
    out = []
    for r in rows:
        sample = _sample(conn, beacon, current, r)
        if sample is None:
            continue  # the beacon round after the answer is not verified yet
        assert r.memory_answers is not None  # an answered challenge holds its answers
        island = loads(r.memory_answers)
        out.append(
            PendingAdmission(
                hotkey=r.hotkey,
                device_class=r.device_class,
                seed=r.seed,
                seed_beacon_round=r.seed_beacon_round,
                workload_steps=spec.workload_steps,
                memory_claims=_claims(r),
                memory_sample=sample,
                memory_answers=[island[d][q] for d, q in sample],
            )
        )
    return out


def check(state: ServiceState, env: Envelope, admit: Admit) -> JoinAnswer:
    """A worker's reference: admit (via ``admit(run_id, hotkey, JoinRequest, class)``)
    when every device's hash equals it, refuse otherwise."""
    _, body = state.open_signed(
        env,
        "admission-check",
        AdmissionCheck,
        registered=False,
        allowed=state.settings.worker_hotkeys,
    )
    run_id = env.run_id
    state.manifest(run_id)
    row = _require(state.conn, run_id, body.hotkey)
    if row.status != "answered" or body.seed_beacon_round != row.seed_beacon_round:
        raise ConflictError(f"challenge is {row.status}, not awaiting a check", code="closed")
    sample = _sample(state.conn, state.beacon, state.current, row)
    if sample is None:
        raise PhaseError("the sample's beacon round is not public yet", code="no_sample")
    request = JoinRequest.model_validate(loads(row.join_body))
    if body.refusal is not None:  # the worker stopped early: its typed reason is the refusal
        reason = f"{body.refusal}: {body.detail}" if body.detail else body.refusal
    else:
        checked = {(m.device, m.query): m.answer for m in body.memory}
        if sorted(checked) != sample or len(checked) != len(body.memory):
            raise ChallengeError(f"the check must cover exactly {sample}", code="bad_sample")
        assert row.hashes is not None and row.memory_answers is not None  # it is answered
        reason = _refusal(loads(row.hashes), loads(row.memory_answers), body, checked)
        # the budget (the layout) is admitted on the proven bytes, whatever the claim said
        reason = reason or (proven_memory_problem(state.manifest(run_id), request) or "")
    with transaction(state.conn):
        state.burn(env)
        if not reason:
            _close(state.conn, state.settings, state.due_round, run_id, body.hotkey, "admitted", "")
            result = admit(run_id, body.hotkey, request, row.device_class)
            proven = sum(table_shape(claim).proven_bytes for claim in _claims(row))
            roster_storage.prove_memory(state.conn, run_id, body.hotkey, proven)
        else:
            _close(
                state.conn, state.settings, state.due_round, run_id, body.hotkey, "refused", reason
            )
            result = JoinAnswer(admitted=False, run_id=run_id, hotkey=body.hotkey)
    state.count("admissions_refused" if reason else "admissions_admitted")
    return result


def _refusal(
    hashes: list[str],
    memory: list[list[str]],
    body: AdmissionCheck,
    checked: dict[tuple[int, int], str],
) -> str:
    """Why the answers fail the check ("" when they pass)."""
    bad = [i for i, h in enumerate(hashes) if h != body.reference_hash]
    if bad:
        return f"devices {bad} differ from the reference"
    wrong = sorted({d for (d, q), answer in checked.items() if memory[d][q] != answer})
    if wrong:
        return f"memory_mismatch: answers of devices {wrong} differ from the recomputed table"
    return ""


def _randomness(
    conn: sqlite3.Connection, beacon: BeaconSource, current: BeaconRound | None, number: int
) -> str | None:
    """The verified randomness of beacon round ``number`` (None: not verified yet;
    ``current``: the latest verified round)."""
    if current is None or current.round < number:
        return None
    if current.round == number:
        return current.randomness
    stored = rounds_storage.beacon(conn, number)
    return stored.randomness if stored else beacon.get(number).randomness


def _seed(
    conn: sqlite3.Connection, beacon: BeaconSource, current: BeaconRound | None, row: ChallengeRow
) -> int | None:
    if row.seed is not None:
        return int(row.seed)
    number = row.seed_beacon_round
    randomness = _randomness(conn, beacon, current, number)
    if randomness is None:
        return None
    seed = challenge_seed(row.run_id, row.hotkey, number, randomness)
    with transaction(conn):
        admission_storage.set_seed(conn, row.run_id, row.hotkey, seed)
    return seed


def _close(
    conn: sqlite3.Connection,
    s: Settings,
    due_round: DueRound,
    run_id: str,
    hotkey: str,
    status_: ChallengeStatus,
    reason: str,
) -> None:
    """Decide a challenge; a refusal counts towards the hotkey's backoff."""
    admission_storage.close(conn, run_id, hotkey, status_, reason)
    if status_ == "refused":
        row = admission_storage.challenge(conn, run_id, hotkey)
        assert row is not None
        refusals = row.refusals + 1
        wait = s.admission_backoff_rounds << min(refusals - 1, MAX_BACKOFF_DOUBLINGS)
        admission_storage.record_refusal(conn, run_id, hotkey, refusals, due_round() + wait)


def _require(conn: sqlite3.Connection, run_id: str, hotkey: str) -> ChallengeRow:
    """The island's challenge (the caller checked that the run exists)."""
    row = admission_storage.challenge(conn, run_id, hotkey)
    if row is None:
        raise NotFoundError(
            f"{hotkey} has no admission challenge in {run_id}", code="unknown_challenge"
        )
    return row
