"""Audit a round: for each coordinator-signed assignment, verify, replay, post a verdict.

:func:`audit_round` handles one round in its audit phase; :func:`follow` loops over
the run, auditing each round when it reaches the audit phase. Every input is verified
first (see the package docstring); a verdict is signed with the auditor's hotkey
(which the service must list as a worker) and posted with the worker token.

The auditor is total: each assignment ends in ``match``, ``mismatch`` or
``unverifiable`` (the island's own inputs could not be fetched, parsed or proven),
and nothing one island publishes can stop the work on the others or delay their
verdicts: an assignment still waiting for an upload is set aside until every other one
is posted (:mod:`~hypertrain.auditor.uploads`). Blob downloads are
bounded while streaming (the index by :data:`~.index.MAX_INDEX_BYTES`, a checkpoint
by the exact size its layout gives). A failure that is not the island's (the relay
or service unreachable, a record the coordinator signed that does not verify) is
logged and retried on the next poll, at most ``max_attempts`` times per round (a pass
in which the service or relay was away does not count), and never stops the
assignments after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from torch import Tensor

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import VerdictAnswer
from hypertrain.auditor.replay import AuditOutcome, IslandRound, audit_island
from hypertrain.auditor.uploads import (
    ISLAND_BLOB_FAULTS,
    NotCountedError,
    UploadPending,
    check_arrival,
    held,
    judging_ready,
    ready_only,
)
from hypertrain.evidence.errors import IslandInputError, VerificationError
from hypertrain.evidence.index import (
    MAX_INDEX_BYTES,
    CheckpointIndex,
    sha_from_url,
    upload_deadline,
)
from hypertrain.evidence.inputs import (
    fetch_start_params,
    island_layout,
    load_samples,
    open_dataset,
)
from hypertrain.evidence.opens import OpenRecords
from hypertrain.evidence.start import PreviousRound, carries_previous, derive_start_state
from hypertrain.evidence.verify import (
    find_commit,
    verify_assignment,
    verify_commit,
)
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment, Commit, RoundOpen, Verdict
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import NotFoundError as RelayNotFoundError
from hypertrain.relay.errors import RelayError
from hypertrain.rolekit import Emit, peer_away, role_events
from hypertrain.trainer.checkpoint import checkpoint_size
from hypertrain.trainer.round_config import island_train_config

log = logging.getLogger(__name__)
emit_json = role_events("auditor")


class RoundRecords(Protocol):
    """What an auditor reads of a round (a ``RoundDetail`` from the service has both)."""

    @property
    def open(self) -> Envelope: ...

    @property
    def commits(self) -> list[Envelope]: ...


@dataclass(frozen=True, slots=True)
class Auditor:
    service: ChallengeClient
    relay: RelayClient
    key: Hotkey
    manifest: RunManifest
    dataset_dir: Path
    expiry_margin: int = 50
    device: str = "cpu"  # where admission-challenge references are computed
    upload_poll_s: float = 0.5  # how often a not-yet-uploaded selected checkpoint is retried
    # Answers pending disputes; called before each assignment and at every poll of an
    # upload wait, so no island-controlled wait delays a dispute answer (see follow).
    attend: Callable[[], None] | None = None
    # the round-open records verified so far and the assignment chain (evidence.opens)
    opens: OpenRecords = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "opens", OpenRecords(self.manifest))

    def round_detail(self, detail: RoundRecords, index: int, w: int) -> RoundRecords:
        return detail if w == index else self.service.round_detail(self.manifest.run_id, w)

    def island_round(self, detail: RoundRecords, assignment: AuditAssignment) -> IslandRound:
        """Every verified input of one assignment. Raises :class:`IslandInputError` when
        one the island authored fails, another error when a public one does."""
        index, hotkey = assignment.round, assignment.hotkey
        opens = self.opens.upto(index, lambda w: self.round_detail(detail, index, w).open)
        raw = find_commit(detail, hotkey)
        if raw is None:
            raise VerificationError(f"{hotkey} has no commit in round {index}")
        commit = verify_commit(raw, self.manifest, hotkey, index)
        layout = island_layout(self.manifest, opens[-1], hotkey)
        config = island_train_config(self.manifest, index, layout=layout)
        dataset = open_dataset(self.dataset_dir, self.manifest)
        ids = self.opens.sample_ids(dataset, index, hotkey)
        _, params = fetch_start_params(self.relay, opens[-1], self.manifest)
        previous = self.previous_round(detail, index, hotkey, opens)
        try:
            index_bytes = self.island_blob(
                sha_from_url(commit.checkpoint_url), "checkpoint index", MAX_INDEX_BYTES
            )
            checkpoints = CheckpointIndex.from_bytes(index_bytes, leaf_count=commit.leaf_count)
            start = derive_start_state(
                self.manifest,
                config,
                index,
                params,
                previous,
                # under ``carry`` the island uploads it once selected, like a checkpoint,
                # unless the auditor that matched its round before stored it already
                lambda sha, limit: self.awaited_blob(sha, self.upload_by(assignment), limit),
            )
        except (IslandInputError, RelayError, ServiceError, UploadPending):
            raise
        except Exception as exc:  # island-authored bytes: any failure is unverifiable
            raise IslandInputError(f"{type(exc).__name__}: {exc}"[:2048]) from exc
        return IslandRound(
            self.manifest,
            commit,
            checkpoints,
            load_samples(dataset, ids),
            start.params(),  # the island's own start (an overlapped one too)
            layout,
            start,
        )

    def previous_round(
        self, detail: RoundRecords, index: int, hotkey: str, opens: list[RoundOpen]
    ) -> PreviousRound | None:
        """The island's commit of round ``index - 1`` (``carry`` or overlapped rounds;
        None otherwise)."""
        if not carries_previous(self.manifest, opens[index], hotkey):
            return None
        raw = find_commit(self.round_detail(detail, index, index - 1), hotkey)
        commit: Commit | None = None
        if raw is not None:
            commit = verify_commit(raw, self.manifest, hotkey, index - 1)

        def start_params() -> dict[str, Tensor]:
            return fetch_start_params(self.relay, opens[index - 1], self.manifest)[1]

        if self.manifest.round.overlap and commit is not None:
            # a public input the overlapped start needs: fetched here, before any
            # island-authored byte is judged, so the relay's failure is never the island's
            params = start_params()
            return PreviousRound(commit, lambda: params, len(opens[index - 1].roster))
        return PreviousRound(commit, start_params, len(opens[index - 1].roster))

    def store_carried(self, assignment: AuditAssignment, carried: bytes) -> bool:
        """Store the state a matched round carries on the relay, the next round's start
        (:func:`~hypertrain.challenge.facts.stored_carries`), at the address the island's
        index names (the replay's update check compared them). Best effort:
        an island uploads what the relay does not hold, so a refused store (the auditor's
        quota, an outage) costs bytes, never a verdict; False then."""
        try:
            self.relay.put(
                carried,
                kind="checkpoint",
                round=assignment.round,
                expiry_round=self.service.beacon_round() + self.expiry_margin,
            )
        except RelayError as exc:
            log.warning("round %s %s: carried state not stored: %s", assignment.round,
                        assignment.hotkey, exc)  # fmt: skip
            return False
        return True

    def island_blob(self, sha256: str, what: str = "checkpoint", max_bytes: int = 0) -> bytes:
        """A blob the island must provide, at most ``max_bytes`` (default: one checkpoint).

        Missing (withheld) or oversized is the island's fault (:class:`IslandInputError`);
        the relay being unreachable is not, and raises :class:`RelayError`.
        """
        limit = max_bytes or checkpoint_size(island_train_config(self.manifest, 0).state_config())
        try:
            return self.relay.get(sha256, max_bytes=limit)
        except RelayNotFoundError as exc:
            raise IslandInputError(f"{what} {sha256[:16]}… is not available") from exc
        except RelayError as exc:
            if exc.reason in ISLAND_BLOB_FAULTS:
                raise IslandInputError(f"{what} {sha256[:16]}…: {exc}") from exc
            raise

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        """The verdict on one assignment; raises only for failures that are not the island's."""
        segments = tuple(sorted(set(assignment.segments)))
        try:
            island = self.island_round(detail, assignment)
        except IslandInputError as exc:
            return AuditOutcome("unverifiable", 0, False, str(exc), segments)
        deadline = self.upload_by(assignment)
        if ready_only():  # no replay before every selected checkpoint is there (uploads)
            for k in segments:
                if 0 < k < len(island.index.blobs):
                    self.check_uploaded(island.index.blobs[k], deadline)
        return audit_island(
            island, assignment.segments, lambda sha: self.awaited_blob(sha, deadline)
        )

    def upload_by(self, assignment: AuditAssignment) -> int:
        """The beacon round by which the island must have uploaded what it was selected for."""
        return upload_deadline(
            assignment.selection_beacon_round, self.manifest.round.audit_window_rounds
        )

    def awaited_blob(self, sha256: str, deadline: int, max_bytes: int = 0) -> bytes:
        """A selected checkpoint: the island uploads it after the selection, so wait for it
        until beacon round ``deadline``; missing after it (or held without an arrival
        record: a regional copy never forwarded) means withheld. Inside
        :func:`~hypertrain.auditor.uploads.judging_ready` a missing one raises
        :class:`~hypertrain.auditor.uploads.UploadPending` instead of waiting, so the
        round's other islands are judged first (:func:`audit_round`)."""
        while True:
            try:
                data = self.island_blob(sha256, max_bytes=max_bytes)
                self.check_in_time(sha256, deadline)
                return data
            except IslandInputError as exc:
                # not there, or held without an arrival record (a regional copy): not yet
                missing = isinstance(exc.__cause__, RelayNotFoundError) or (
                    isinstance(exc, NotCountedError) and exc.arrived is None
                )
                if not missing or self.service.beacon_round() > deadline:
                    raise
            if ready_only():
                raise UploadPending(sha256, deadline)
            self.answer_pending()
            time.sleep(self.upload_poll_s)

    def check_uploaded(self, sha256: str, deadline: int) -> None:
        """Raise :class:`UploadPending` while the relay lacks ``sha256`` and beacon round
        ``deadline`` has not passed; past it, or once held, the judge decides."""
        if not held(self.relay, sha256) and self.service.beacon_round() <= deadline:
            raise UploadPending(sha256, deadline)

    def check_in_time(self, sha256: str, deadline: int) -> None:
        """:func:`~hypertrain.auditor.uploads.check_arrival` on this auditor's relay."""
        check_arrival(self.relay, sha256, deadline)

    def answer_pending(self) -> None:
        """Answer pending disputes now (a no-op unless :func:`follow` set ``attend``)."""
        if self.attend is not None:
            self.attend()

    def post(self, assignment: AuditAssignment, outcome: AuditOutcome) -> VerdictAnswer:
        """Post the verdict; under ``carry`` a match's replayed carried state is stored first
        (every path that posts one: a round's audit, a re-audit), so the round-open record
        that lists the island for it (``carry_stored``) follows a stored state."""
        if outcome.carried is not None:
            self.store_carried(assignment, outcome.carried)
        body = Verdict(
            round=assignment.round,
            hotkey=assignment.hotkey,
            segments=list(outcome.segments),
            result=outcome.result,
            first_bad_leaf=outcome.first_bad_leaf,
            update_checked=outcome.update_checked,
            detail=outcome.detail[:2048],
            check=outcome.check,
        )
        expiry = self.service.beacon_round() + self.expiry_margin
        env = seal(
            self.key,
            domain="verdict",
            run_id=self.manifest.run_id,
            body=body.model_dump(mode="json"),
            expiry_round=expiry,
        )
        return self.service.verdict(env)


@dataclass
class RoundProgress:
    """Which assignments of a round already have a posted verdict, and how many passes.

    ``away``: the last pass's assignments that failed because the service or a relay
    was away (no answer, 5xx); such a pass does not count in ``attempts``, so a peer
    that is away for a while never makes the auditor give up a round."""

    posted: set[str] = field(default_factory=set)
    attempts: int = 0
    unfinished: int = 0
    away: int = 0


def refused(exc: Exception) -> bool:
    """The service refuses this auditor itself (token 401, hotkey not a worker 403):
    retrying cannot help, so the loops stop and the command says what to change."""
    return isinstance(exc, ServiceError) and exc.status in (401, 403)


def audit_round(
    auditor: Auditor,
    index: int,
    emit: Emit = emit_json,
    progress: RoundProgress | None = None,
) -> list[AuditOutcome]:
    """Judge every assignment of round ``index`` not yet posted; returns the outcomes posted.

    Every assignment whose inputs the relay holds is judged and posted first; one that
    waits for an upload (:class:`~hypertrain.auditor.uploads.UploadPending`) is set aside
    and only then polled, each judged as soon as its blob arrives or its upload deadline
    passes, so a withheld upload delays its own verdict only. A failure on one assignment
    is emitted as an ``error`` event and counted in ``progress.unfinished``; the others
    are still judged and posted.
    """
    progress = progress if progress is not None else RoundProgress()
    detail = auditor.service.round_detail(auditor.manifest.run_id, index)
    progress.unfinished = progress.away = 0
    outcomes: list[AuditOutcome] = []
    waiting: dict[int, UploadPending] = {}

    def attempt(position: int, pending: UploadPending | None = None) -> None:
        key = f"#{position}"
        auditor.answer_pending()  # a game's answer never waits behind the round's replays
        try:
            assignment = verify_assignment(detail.assignments[position], auditor.manifest)
            key = assignment.hotkey
            with judging_ready():
                if pending is not None:  # only the awaited blob is polled until it is there
                    auditor.check_uploaded(pending.sha256, pending.deadline)
                outcome = judge_and_post(auditor, detail, assignment, emit)
        except UploadPending as still:
            waiting[position] = still
            return
        except Exception as exc:  # one assignment never stops the others
            if refused(exc):
                raise
            progress.unfinished += 1
            progress.away += int(peer_away(exc))
            emit("error", round=index, assignment=key, detail=f"{type(exc).__name__}: {exc}"[:500])
            return
        progress.posted.add(f"#{position}")
        outcomes.append(outcome)

    for position in range(len(detail.assignments)):
        if f"#{position}" not in progress.posted:
            attempt(position)
    while waiting:  # then the uploads still awaited, each until its own deadline
        for position, pending in sorted(waiting.items()):
            del waiting[position]
            attempt(position, pending)
        if waiting:
            time.sleep(auditor.upload_poll_s)
    if progress.away == 0:  # a pass a peer was away for does not count against the round
        progress.attempts += 1
    return outcomes


def judge_and_post(
    auditor: Auditor, detail: RoundRecords, assignment: AuditAssignment, emit: Emit
) -> AuditOutcome:
    """Judge one assignment, emit its ``verdict`` event and post it (a duplicate is fine)."""
    t0 = time.perf_counter()
    outcome = auditor.judge(detail, assignment)
    emit(
        "verdict",
        round=assignment.round,
        hotkey=assignment.hotkey,
        result=outcome.result,
        first_bad_leaf=outcome.first_bad_leaf,
        segments=list(outcome.segments),
        update_checked=outcome.update_checked,
        seconds=round(time.perf_counter() - t0, 3),
    )
    try:
        auditor.post(assignment, outcome)
    except ServiceError as exc:
        if exc.code != "duplicate":
            raise
    return outcome
