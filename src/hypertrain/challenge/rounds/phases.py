"""Runs and the round state machine's transitions (creating a run, opening a round,
fixing its audit selection); the step of each verified beacon round that moves every
round through them is :mod:`hypertrain.challenge.lifecycle.clock`.

Phases of a round, each entered at a beacon round (``now`` is the latest verified one):

* ``train``: opened at beacon round ``b0`` with the start model and the
  data-assignment key; commits are accepted while ``now <= commit_deadline``
  (``b0 + commit_window_rounds``), or until every rostered island has committed
  (:mod:`hypertrain.challenge.rounds.pace`).
* ``beacon``: the commit phase closed; waiting for the first beacon round strictly
  after the close (``commit_deadline + 1`` unless every island committed earlier),
  whose randomness selects the audits.
* ``audit``: assignments are fixed and signed; verdicts are accepted while
  ``now < audit_close_round`` (selection round + ``audit_window_rounds``) and
  until every assignment has a verdict.
* ``merge``: waiting for the aggregator's signed tape (a round nobody committed to
  goes straight to final).
* ``settle``: the tape is in (the next round may open from its model, where witnesses
  are required once they cleared it: :mod:`~hypertrain.challenge.rounds.chain`); disputes stay
  possible until ``dispute_deadline_round`` (audit close + ``dispute_window_rounds``).
  The round settles at the first beacon round for which
  :func:`~hypertrain.challenge.settlement.settle.ready_to_settle` holds.
* ``final``: the ledger settled the round from the tape and the verdicts.
"""

from __future__ import annotations

import json
import logging
import sqlite3

from pydantic import JsonValue, ValidationError

from hypertrain.challenge.errors import ChallengeError, ConflictError, PhaseError
from hypertrain.challenge.facts import accused_before, proven_faults, stored_carries
from hypertrain.challenge.ports import BeaconRound
from hypertrain.challenge.rounds import chain
from hypertrain.challenge.rounds.selection import select_audits
from hypertrain.challenge.state import ServiceState, dumps
from hypertrain.challenge.store import audit_storage, commit_storage, roster_storage, rounds_storage
from hypertrain.protocol.deadlines import check_answer_deadline
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.errors import DeadlineError
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import AuditAssignment, ManifestRecord, RoundOpen
from hypertrain.protocol.round_key import assignment_key, keying_randomness
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)
PHASES = ("train", "beacon", "audit", "merge", "settle", "final")
OPENABLE_AFTER = frozenset({"settle", "final"})


def create_run(state: ServiceState, manifest_doc: dict[str, JsonValue]) -> Envelope:
    """Store a run, its coordinator-signed manifest and its ledger account."""
    try:
        manifest = RunManifest.model_validate({**manifest_doc, "coordinator": state.coordinator})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "manifest"
        raise ChallengeError(f"manifest.{where}: {first['msg']}", code="bad_manifest") from None
    try:  # a dispute answer must fit its deadline on this service's beacon
        check_answer_deadline(manifest, state.beacon_period_s())
    except DeadlineError as exc:
        raise ChallengeError(f"manifest.dispute: {exc}", code="bad_manifest") from None
    claimed = manifest_doc.get("coordinator")
    if claimed not in (None, "", state.coordinator):
        raise ChallengeError(
            f"manifest names coordinator {claimed}, this service is {state.coordinator}",
            code="bad_manifest",
        )
    envelope = state.sign(manifest.run_id, "manifest", ManifestRecord(manifest=manifest))
    try:
        with transaction(state.conn):
            rounds_storage.add_run(
                state.conn,
                manifest.run_id,
                manifest.model_dump_json(),
                dumps(envelope.model_dump()),
                manifest.digest(),
            )
            state.ledger.create_run(
                manifest.run_id,
                pool_per_round=manifest.reward.pool_per_round,
                vesting_rounds=manifest.reward.vesting_rounds,
            )
    except sqlite3.IntegrityError:
        raise ConflictError(f"run {manifest.run_id!r} already exists") from None
    log.info("created run %s (manifest %s)", manifest.run_id, manifest.digest())
    return envelope


def open_round(
    state: ServiceState, run_id: str, start_model_sha256: str | None, start_model_url: str | None
) -> Envelope:
    """Open the next round at the current beacon round; the previous one must be final."""
    manifest = state.manifest(run_id)
    beacon = state.current
    state.current_round()
    assert beacon is not None
    last = rounds_storage.last_round(state.conn, run_id)
    if last is not None and last[1] not in OPENABLE_AFTER:
        raise PhaseError(f"round {last[0]} of {run_id} is still in phase {last[1]}")
    index = 0 if last is None else last[0] + 1
    sha, url = _start_model(state, run_id, index, start_model_sha256, start_model_url)
    layouts = _open_roster(state, run_id, manifest)
    roster = sorted(layouts)
    # an island with a proven (final) fault is replayed every round: it starts from the
    # public state, so its replays need nothing it holds (evidence.start.carries_previous);
    # a fault a dispute may still overturn changes no island's training
    proven = {hotkey for r, hotkey in proven_faults(state.conn, run_id) if r < index}
    fresh = sorted(proven & set(roster))
    stored = sorted(stored_carries(state.conn, manifest, run_id, index) & set(roster) - proven)
    record = RoundOpen(
        round=index,
        start_model_sha256=sha,
        start_model_url=url,
        beacon_round=beacon.round,
        assignment_key=_round_key(state, manifest, index, beacon),
        roster=roster,
        commit_deadline_round=beacon.round + manifest.round.commit_window_rounds,
        layouts=layouts,
        fresh_start=fresh,
        carry_stored=stored,
    )
    envelope = state.sign(run_id, "round-open", record)
    with transaction(state.conn):
        _remember_beacon(state.conn, beacon)
        rounds_storage.add_round(
            state.conn,
            rounds_storage.NewRound(
                run_id=run_id,
                round=index,
                beacon=_row(beacon),
                assignment_key=record.assignment_key,
                commit_deadline=record.commit_deadline_round,
                start_model_sha256=sha,
                start_model_url=url,
                open_envelope=dumps(envelope.model_dump()),
            ),
        )
    log.info("opened round %s/%d at beacon %d", run_id, index, beacon.round)
    return envelope


def _round_key(state: ServiceState, manifest: RunManifest, index: int, beacon: BeaconRound) -> str:
    """Round ``index``'s data-assignment key (:mod:`hypertrain.protocol.round_key`)."""
    previous = rounds_storage.selection_beacon(state.conn, manifest.run_id, index - 1)
    randomness = keying_randomness(
        manifest.round.overlap, beacon.randomness, None if previous is None else previous.randomness
    )
    return assignment_key(manifest.run_id, index, randomness)


def _open_roster(state: ServiceState, run_id: str, manifest: RunManifest) -> dict[str, LayoutSpec]:
    """Registered islands that have not left, and the layouts they were admitted with."""
    out: dict[str, LayoutSpec] = {}
    for hotkey, layout in roster_storage.roster_layouts(state.conn, run_id):
        if state.metagraph.is_registered(hotkey):
            stored = json.loads(layout)
            out[hotkey] = LayoutSpec.model_validate(stored) if stored else manifest.round.layout
    return out


def _start_model(
    state: ServiceState, run_id: str, index: int, sha: str | None, url: str | None
) -> tuple[str, str]:
    """The named start model (checked against the witnessed chain where witnesses are
    required), or by default the chain's (:func:`chain.next_start`)."""
    now = state.due_round()
    if sha and url is not None:
        chain.check_start(state, run_id, index, sha, now)
        return sha, url
    start = chain.next_start(state, run_id, index, now)  # a correction's model, if any
    if start is None:
        raise ChallengeError(
            "start_model_sha256 and start_model_url are required (no merged model to continue)",
            code="no_start_model",
        )
    return start


def _remember_beacon(conn: sqlite3.Connection, beacon: BeaconRound) -> None:
    rounds_storage.remember_beacon(conn, _row(beacon))


def _row(beacon: BeaconRound) -> rounds_storage.BeaconRow:
    return rounds_storage.BeaconRow(beacon.round, beacon.randomness, beacon.signature)


def select_round(state: ServiceState, run_id: str, index: int, selector: BeaconRound) -> None:
    """Fix the audit selection of a round from the selecting beacon round.

    An island is forced into the audit (its probation flag) while its probation lasts;
    after a proven fault in an earlier round, for the rest of the run (a caught cheater
    that stays registered is replayed every round, never sampled at the rate); and in a
    round where its commit names the same update or checkpoint root as another island's
    (every holder of a copy is replayed, so the island whose own assignment produced the
    bytes keeps them, whoever committed first).
    """
    manifest = state.manifest(run_id)
    forced = set(accused_before(state.conn, run_id, index))
    forced |= commit_storage.shared_commitments(state.conn, run_id, index)
    committed = {
        hotkey: index < until or hotkey in forced
        for hotkey, until in roster_storage.committed_probation(state.conn, run_id, index).items()
    }
    audits = select_audits(
        run_id=run_id,
        round_index=index,
        beacon_round=selector.round,
        randomness_hex=selector.randomness,
        committed=committed,
        rate=manifest.audit.rate,
        segments_per_audit=manifest.audit.segments,
        num_segments=manifest.round.num_segments,
    )
    audit_close = selector.round + manifest.round.audit_window_rounds
    with transaction(state.conn):
        _remember_beacon(state.conn, selector)
        for audit in audits:
            body = AuditAssignment(
                round=index,
                hotkey=audit.hotkey,
                segments=list(audit.segments),
                selection_beacon_round=selector.round,
            )
            envelope = state.sign(run_id, "audit-assignment", body)
            audit_storage.add_audit(
                state.conn,
                run_id,
                index,
                audit.hotkey,
                dumps(list(audit.segments)),
                audit.probation,
                dumps(envelope.model_dump()),
            )
        rounds_storage.start_audit(
            state.conn,
            run_id,
            index,
            selector.round,
            audit_close,
            audit_close + manifest.round.dispute_window_rounds,
        )
    log.info(
        "round %s/%d: %d of %d islands selected for audit by beacon %d",
        run_id,
        index,
        len(audits),
        len(committed),
        selector.round,
    )
