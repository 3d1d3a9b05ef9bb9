"""Verify the public records of a round: the run manifest, round opens, audit
assignments (the coordinator's), commits (an island's) and verdicts (an auditor's).

A miner, auditor or aggregator pins the coordinator's SS58 address (its config); when it
does not, the manifest's own ``coordinator`` field is used and every later record must be
signed by that same key (trust on first use, logged by the caller). A manifest that names
no coordinator, with none pinned, is refused (:class:`CoordinatorError`): no record of
the coordinator's could be checked. Every role checks these records with these functions
only, so an island, an auditor and the aggregator accept and refuse the same records.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError

from hypertrain.evidence.errors import (
    CommitRoundError,
    CoordinatorError,
    IslandInputError,
    VerificationError,
)
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import (
    AuditAssignment,
    Commit,
    ManifestRecord,
    RoundOpen,
    Verdict,
)


def _open(raw: Any, domain: str, run_id: str | None, signer: str | None) -> dict[str, Any]:
    try:
        verified = open_envelope(raw, domain=domain, run_id=run_id)
    except EnvelopeError as exc:
        raise VerificationError(f"{domain} record refused: {exc}") from exc
    if signer is not None and verified.signer != signer:
        raise VerificationError(
            f"{domain} record is signed by {verified.signer}, expected {signer}"
        )
    return verified.body


def verify_manifest(raw: Any, run_id: str, coordinator: str | None) -> RunManifest:
    """The run manifest from its signed envelope (signature, run id, signer)."""
    try:
        claimed = raw["body"]["manifest"]["coordinator"]
    except (KeyError, TypeError):
        raise VerificationError("manifest envelope has no coordinator field") from None
    expected = coordinator or claimed
    if not expected:
        raise CoordinatorError(
            f"run {run_id}: the manifest names no coordinator and none is pinned, so no"
            " round-open record or audit assignment could be checked; refusing the run"
        )
    body = _open(raw, "manifest", run_id, expected)
    try:
        manifest = ManifestRecord.model_validate(body).manifest
    except ValidationError as exc:
        raise VerificationError(f"manifest body is invalid: {exc.errors()[0]['msg']}") from exc
    if manifest.coordinator != expected:
        raise VerificationError("manifest names another coordinator than its signer")
    return manifest


def coordinator_of(manifest: RunManifest) -> str:
    """The key that signs the run's records; :class:`CoordinatorError` when it names none."""
    if not manifest.coordinator:
        raise CoordinatorError(
            f"run {manifest.run_id}: the manifest names no coordinator, so its records"
            " cannot be checked"
        )
    return manifest.coordinator


def verify_round_open(raw: Any, manifest: RunManifest, index: int) -> RoundOpen:
    """A round-open record signed by the run's coordinator, for round ``index``."""
    body = _open(raw, "round-open", manifest.run_id, coordinator_of(manifest))
    try:
        record = RoundOpen.model_validate(body)
    except ValidationError as exc:
        raise VerificationError(f"round-open body is invalid: {exc.errors()[0]['msg']}") from exc
    if record.round != index:
        raise VerificationError(f"round-open record is for round {record.round}, not {index}")
    return record


def verify_assignment(raw: Any, manifest: RunManifest, index: int | None = None) -> AuditAssignment:
    """An audit assignment signed by the coordinator, with segments in range (and, given
    ``index``, for that round)."""
    body = _open(raw, "audit-assignment", manifest.run_id, coordinator_of(manifest))
    try:
        assignment = AuditAssignment.model_validate(body)
    except ValidationError as exc:
        raise VerificationError(f"assignment body is invalid: {exc.errors()[0]['msg']}") from exc
    bad = [s for s in assignment.segments if not 0 <= s < manifest.round.num_segments]
    if bad:
        raise VerificationError(f"assignment names segments {bad} outside the round")
    if index is not None and assignment.round != index:
        raise VerificationError(f"assignment is for round {assignment.round}, not {index}")
    return assignment


def verify_commit(raw: Any, manifest: RunManifest, hotkey: str, index: int) -> Commit:
    """An island's commit, signed by that island, for round ``index``.

    A commit that does not open (signature, run, domain) is refused with
    :class:`VerificationError`: the service accepted it, so the island is not to blame.
    A well-signed body that is invalid for the round is the island's own
    (:class:`IslandInputError`).
    """
    body = _open(raw, "commit", manifest.run_id, hotkey)
    try:
        commit = Commit.model_validate(body)
    except ValidationError as exc:
        raise IslandInputError(f"commit body is invalid: {exc.errors()[0]['msg']}") from exc
    if commit.round != index:
        raise CommitRoundError(f"commit is for round {commit.round}, not {index}", commit)
    if commit.leaf_count != manifest.round.num_segments + 1:
        raise IslandInputError(f"commit has {commit.leaf_count} leaves, the round needs more")
    return commit


def verify_verdict(
    raw: Any, manifest: RunManifest, index: int, assigned: Mapping[str, Collection[int]]
) -> Verdict:
    """An auditor's verdict for round ``index`` on an audit the coordinator assigned
    (``assigned``: hotkey -> segments, from the round's verified assignments): signed
    for the run by a key other than the judged island's, on a non-empty subset of the
    assigned segments. Anything else is :class:`VerificationError` (no verdict)."""
    try:
        verified = open_envelope(raw, domain="verdict", run_id=manifest.run_id)
    except EnvelopeError as exc:
        raise VerificationError(f"verdict record refused: {exc}") from exc
    try:
        verdict = Verdict.model_validate(verified.body)
    except ValidationError as exc:
        raise VerificationError(f"verdict body is invalid: {exc.errors()[0]['msg']}") from exc
    if verdict.round != index:
        raise VerificationError(f"verdict is for round {verdict.round}, not {index}")
    if verified.signer == verdict.hotkey:
        raise VerificationError(f"verdict on {verdict.hotkey} is signed by that island itself")
    segments = assigned.get(verdict.hotkey)
    if segments is None:
        raise VerificationError(f"verdict on {verdict.hotkey}, whose audit was not assigned")
    extra = sorted(set(verdict.segments) - set(segments))
    if extra or not verdict.segments:
        raise VerificationError(f"verdict on segments {extra or '[]'}, not the assigned ones")
    return verdict


def find_commit(detail: Any, hotkey: str) -> Envelope | None:
    """The commit envelope ``hotkey`` signed in a round detail (``RoundDetail``), if any."""
    commits = getattr(detail, "commits", None)
    if not isinstance(commits, list):
        raise VerificationError("round detail has no commit list")
    return next((c for c in commits if isinstance(c, Envelope) and c.signer == hotkey), None)
