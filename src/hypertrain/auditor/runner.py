"""Audit a round: for each coordinator-signed assignment, verify, replay, post a verdict.

:func:`audit_round` handles one round in its audit phase; :func:`follow` loops over
the run, auditing each round once when it reaches the audit phase. Every input is
verified first (see the package docstring); a verdict is signed with the auditor's
hotkey (which the service must list as a worker) and posted with the worker token.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hypertrain.auditor.errors import AuditError, VerificationError
from hypertrain.auditor.index import CheckpointIndex, sha_from_url
from hypertrain.auditor.inputs import (
    fetch_start_params,
    island_layout,
    load_samples,
    open_dataset,
    round_sample_ids,
)
from hypertrain.auditor.replay import AuditOutcome, IslandRound, audit_island
from hypertrain.auditor.verify import verify_assignment, verify_commit, verify_round_open
from hypertrain.challenge.client import ChallengeClient
from hypertrain.challenge.errors import ServiceError
from hypertrain.challenge.models import VerdictAnswer
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment, Verdict
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import NotFoundError as RelayNotFoundError
from hypertrain.relay.errors import RelayError

log = logging.getLogger(__name__)
Emit = Callable[..., None]


def emit_json(event: str, **fields: Any) -> None:
    doc = {"ts": round(time.time(), 3), "role": "auditor", "event": event, **fields}
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


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

    def island_round(self, detail: RoundRecords, assignment: AuditAssignment) -> IslandRound:
        index, hotkey = assignment.round, assignment.hotkey
        opens = [
            verify_round_open(
                (detail if w == index else self.service.round_detail(self.manifest.run_id, w)).open,
                self.manifest,
                w,
            )
            for w in range(index + 1)
        ]
        raw = next((c for c in detail.commits if c.signer == hotkey), None)
        if raw is None:
            raise VerificationError(f"{hotkey} has no commit in round {index}")
        commit = verify_commit(raw, self.manifest, hotkey, index)
        dataset = open_dataset(self.dataset_dir, self.manifest)
        ids = round_sample_ids(self.manifest, dataset, opens, hotkey)
        _, params = fetch_start_params(self.relay, opens[-1], self.manifest)
        index_bytes = self.island_blob(sha_from_url(commit.checkpoint_url), "checkpoint index")
        return IslandRound(
            self.manifest,
            commit,
            CheckpointIndex.from_bytes(index_bytes),
            load_samples(dataset, ids),
            params,
            island_layout(self.manifest, opens[-1], hotkey),
        )

    def island_blob(self, sha256: str, what: str = "checkpoint") -> bytes:
        """A blob the island must provide; missing means withheld (VerificationError)."""
        try:
            return self.relay.get(sha256)
        except RelayNotFoundError as exc:
            raise VerificationError(f"{what} {sha256[:16]}… is not available") from exc

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        try:
            island = self.island_round(detail, assignment)
        except VerificationError as exc:
            if "checkpoint index" not in str(exc):
                raise
            return AuditOutcome("mismatch", 0, False, str(exc), tuple(assignment.segments))
        return audit_island(island, assignment.segments, self.island_blob)

    def post(self, assignment: AuditAssignment, outcome: AuditOutcome) -> VerdictAnswer:
        body = Verdict(
            round=assignment.round,
            hotkey=assignment.hotkey,
            segments=list(outcome.segments),
            result=outcome.result,
            first_bad_leaf=outcome.first_bad_leaf,
            update_checked=outcome.update_checked,
            detail=outcome.detail[:2048],
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


def audit_round(auditor: Auditor, index: int, emit: Emit = emit_json) -> list[AuditOutcome]:
    """Judge every assignment of round ``index``; returns the outcomes posted."""
    detail = auditor.service.round_detail(auditor.manifest.run_id, index)
    outcomes = []
    for raw in detail.assignments:
        assignment = verify_assignment(raw, auditor.manifest)
        t0 = time.perf_counter()
        outcome = auditor.judge(detail, assignment)
        emit(
            "verdict",
            round=index,
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
        outcomes.append(outcome)
    return outcomes


def follow(
    auditor: Auditor,
    *,
    poll_s: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    emit: Emit = emit_json,
) -> None:
    """Audit each round of the run once, when it is in its audit phase; loop until ``stop``."""
    done: set[int] = set()
    while not stop():
        try:
            for summary in auditor.service.rounds(auditor.manifest.run_id):
                index = summary.round
                if summary.phase == "audit" and index not in done:
                    audit_round(auditor, index, emit)
                    done.add(index)
        except (AuditError, ServiceError, RelayError, OSError) as exc:
            emit("error", detail=str(exc)[:500])
        time.sleep(poll_s)
