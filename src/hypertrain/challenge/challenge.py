"""The admission challenge: prove the devices compute, rather than report a hash.

With ``admission.challenge`` on in the manifest, a join request that passes the
report checks does not admit the island; it opens a challenge instead:

1. The workload seed comes from beacon round ``s = join round + delay_rounds``, which
   does not exist when the join is accepted: nobody can precompute the answer.
   :func:`status` shows the seed once the service has verified round ``s``.
2. The island runs the fixed self-check workload with that seed on every device and
   posts one hash per device (``admission-answer``) by round
   ``s + answer_window_rounds``. The window is sized (``workload_steps``) to one
   device's throughput, so a device answering for another, or for more devices than
   it has, misses it. A late answer refuses the island.
3. A worker of the same device class recomputes the reference hash for that seed
   and posts it (``admission-check``). The island is admitted, exactly as a plain join
   admits, only if every device's hash equals the reference; otherwise it is refused.

A refused island, or one whose challenge expired unanswered, may join again (a new
challenge with a new seed).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from hypertrain.challenge.admission import challenge_seed
from hypertrain.challenge.errors import ChallengeError, ConflictError, NotFoundError, PhaseError
from hypertrain.challenge.state import ServiceState, loads, quick_dumps
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import AdmissionAnswer, AdmissionCheck, JoinRequest
from hypertrain.protocol.sqlite import transaction


def open_challenge(
    state: ServiceState, run_id: str, hotkey: str, body: JoinRequest, device_class: str
) -> dict[str, Any]:
    """Record a pending challenge for a join request (replacing a refused one)."""
    spec = state.manifest(run_id).admission
    now = state.due_round()
    row = _row(state, run_id, hotkey)
    expired = row is not None and row["status"] == "pending" and now > row["deadline_round"]
    if row is not None and row["status"] in ("pending", "answered") and not expired:
        raise ConflictError(f"{hotkey} already has an open admission challenge", code="duplicate")
    seed_round = now + spec.delay_rounds
    deadline = seed_round + spec.answer_window_rounds
    state.conn.execute(
        "DELETE FROM admission_challenges WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    )
    state.conn.execute(
        "INSERT INTO admission_challenges (run_id, hotkey, device_class, join_body,"
        " join_beacon_round, seed_beacon_round, deadline_round) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            hotkey,
            device_class,
            quick_dumps(body.model_dump(mode="json")),
            now,
            seed_round,
            deadline,
        ),
    )
    return {
        "admitted": False,
        "run_id": run_id,
        "hotkey": hotkey,
        "challenge": {
            "seed_beacon_round": seed_round,
            "answer_deadline_round": deadline,
            "workload_steps": spec.workload_steps,
            "devices": len(body.devices),
        },
    }


def status(state: ServiceState, run_id: str, hotkey: str) -> dict[str, Any]:
    """The island's challenge: its seed once the seed round is verified, and its status."""
    row = _require(state, run_id, hotkey)
    seed = _seed(state, row)
    return {
        "run_id": run_id,
        "hotkey": hotkey,
        "status": row["status"],
        "reason": row["reason"],
        "seed_beacon_round": row["seed_beacon_round"],
        "answer_deadline_round": row["deadline_round"],
        "workload_steps": state.manifest(run_id).admission.workload_steps,
        "seed": seed,
    }


def answer(state: ServiceState, env: Envelope) -> dict[str, Any]:
    """The island's per-device hashes; refused (and the island with it) when late."""
    verified, body = state.open_signed(env, "admission-answer", AdmissionAnswer, registered=True)
    run_id, hotkey = env.run_id, verified.signer
    row = _require(state, run_id, hotkey)
    if row["status"] != "pending":
        code = "duplicate" if row["status"] == "answered" else "closed"
        raise ConflictError(f"challenge is {row['status']}, not awaiting an answer", code=code)
    if body.seed_beacon_round != row["seed_beacon_round"]:
        raise ChallengeError("answer is for another seed round", code="wrong_seed")
    seed = _seed(state, row)
    if seed is None:
        raise PhaseError("the seed round is not public yet", code="no_seed")
    now = state.due_round()
    if now > row["deadline_round"]:
        with transaction(state.conn):
            state.burn(env)
            _close(state, run_id, hotkey, "refused", f"answer at round {now}, after the deadline")
        raise PhaseError(f"answer deadline {row['deadline_round']} passed (now {now})", code="late")
    devices = len(loads(row["join_body"])["devices"])
    if len(body.hashes) != devices:
        raise ChallengeError(f"{len(body.hashes)} hashes for {devices} devices", code="bad_body")
    with transaction(state.conn):
        state.burn(env)
        state.conn.execute(
            "UPDATE admission_challenges SET hashes = ?, answered_round = ?, status = 'answered'"
            " WHERE run_id = ? AND hotkey = ?",
            (quick_dumps(body.hashes), now, run_id, hotkey),
        )
    return {"accepted": True, "status": "answered"}


def pending(state: ServiceState, run_id: str) -> list[dict[str, Any]]:
    """Answered challenges awaiting a worker's reference hash."""
    state.manifest(run_id)
    rows = state.conn.execute(
        "SELECT hotkey, device_class, seed, seed_beacon_round FROM admission_challenges"
        " WHERE run_id = ? AND status = 'answered' ORDER BY hotkey",
        (run_id,),
    ).fetchall()
    spec = state.manifest(run_id).admission
    return [
        {
            "hotkey": r["hotkey"],
            "device_class": r["device_class"],
            "seed": r["seed"],
            "seed_beacon_round": r["seed_beacon_round"],
            "workload_steps": spec.workload_steps,
        }
        for r in rows
    ]


def check(state: ServiceState, env: Envelope, admit: Any) -> dict[str, Any]:
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
    row = _require(state, run_id, body.hotkey)
    if row["status"] != "answered" or body.seed_beacon_round != row["seed_beacon_round"]:
        raise ConflictError(f"challenge is {row['status']}, not awaiting a check", code="closed")
    hashes = loads(row["hashes"])
    ok = all(h == body.reference_hash for h in hashes)
    with transaction(state.conn):
        state.burn(env)
        if ok:
            _close(state, run_id, body.hotkey, "admitted", "")
            request = JoinRequest.model_validate(loads(row["join_body"]))
            result: dict[str, Any] = admit(run_id, body.hotkey, request, row["device_class"])
        else:
            bad = [i for i, h in enumerate(hashes) if h != body.reference_hash]
            _close(
                state, run_id, body.hotkey, "refused", f"devices {bad} differ from the reference"
            )
            result = {"admitted": False, "run_id": run_id, "hotkey": body.hotkey}
    state.count("admissions_admitted" if ok else "admissions_refused")
    return result


def _seed(state: ServiceState, row: sqlite3.Row) -> int | None:
    if row["seed"] is not None:
        return int(row["seed"])
    number = int(row["seed_beacon_round"])
    current = state.current
    if current is None or current.round < number:
        return None
    if current.round == number:
        randomness = current.randomness
    else:
        stored = state.conn.execute(
            "SELECT randomness FROM beacons WHERE round = ?", (number,)
        ).fetchone()
        randomness = stored["randomness"] if stored else state.beacon.get(number).randomness
    seed = challenge_seed(row["run_id"], row["hotkey"], number, randomness)
    with transaction(state.conn):
        state.conn.execute(
            "UPDATE admission_challenges SET seed = ? WHERE run_id = ? AND hotkey = ?",
            (seed, row["run_id"], row["hotkey"]),
        )
    return seed


def _close(state: ServiceState, run_id: str, hotkey: str, status_: str, reason: str) -> None:
    state.conn.execute(
        "UPDATE admission_challenges SET status = ?, reason = ? WHERE run_id = ? AND hotkey = ?",
        (status_, reason, run_id, hotkey),
    )


def _row(state: ServiceState, run_id: str, hotkey: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = state.conn.execute(
        "SELECT * FROM admission_challenges WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    return row


def _require(state: ServiceState, run_id: str, hotkey: str) -> sqlite3.Row:
    state.manifest(run_id)
    row = _row(state, run_id, hotkey)
    if row is None:
        raise NotFoundError(
            f"{hotkey} has no admission challenge in {run_id}", code="unknown_challenge"
        )
    return row
