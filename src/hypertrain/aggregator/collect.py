"""Collection: which committed updates of a round are offered to the merge.

Input is the service's public round record (``GET /v1/runs/{run}/rounds/{w}``).
Nothing in it is trusted on the service's word: the round-open record must carry the
run coordinator's signature, and each commit the signature of the island it names.
A commit is excluded at this stage, with its reason, when

* its signature does not verify (``bad_commit``) or it names another run or round
  (``wrong_round``);
* an auditor's verdict for that island in this round is anything but ``match``
  (``audit_mismatch``: a mismatch or an unverifiable input), the same rule the
  service's settlement uses;
* the coordinator assigned it an audit and no verifiable verdict exists
  (``audit_pending``): "no verdict" never means "merged" (settlement holds its
  reward until a verdict exists);
* it re-submits an update already merged in an earlier round (``stale_update``).

A verdict envelope that does not verify (signature, run, body) is not dropped
silently: it is recorded in ``Collected.refused_verdicts`` with its reason and
counts as no verdict. Collection also reports which islands an audit *proved* this
round (a ``match`` verdict that checked the update itself): their norms anchor the
merge's reference norm. Each candidate carries its commit's arrival position (the
service's ``commit_order``), so the merge keeps the earliest of two copies.

The update is addressed by ``Commit.update_sha256``: the plain SHA-256 of the
encoded update, which is also its relay address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from hypertrain.aggregator.tape import Candidate, Excluded
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail, VerdictRecord
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment, Commit, RoundOpen, Verdict


@dataclass(frozen=True)
class RefusedVerdict:
    """A verdict record that did not verify: no verdict, with the reason why."""

    position: int  # its index in the round record's ``verdicts``
    verdict_id: str
    reason: str


@dataclass(frozen=True)
class Collected:
    round: int
    start_model_sha256: str
    candidates: list[Candidate]
    excluded: list[Excluded]
    proven: list[str] = field(default_factory=list)
    refused_verdicts: list[RefusedVerdict] = field(default_factory=list)


def verify_round_open(record: Any, manifest: RunManifest, index: int) -> RoundOpen:
    try:
        env = open_envelope(record, domain="round-open", run_id=manifest.run_id)
        body = RoundOpen.model_validate(env.body)
    except (EnvelopeError, ValidationError) as exc:
        raise ServiceError(f"round {index}: bad round-open record: {exc}") from None
    if manifest.coordinator and env.signer != manifest.coordinator:
        raise ServiceError(f"round {index} was opened by {env.signer}, not the coordinator")
    if body.round != index:
        raise ServiceError(f"round-open record is for round {body.round}, not {index}")
    return body


def _verdicts(
    verdicts: Iterable[Any], run_id: str, index: int
) -> tuple[list[Verdict], list[RefusedVerdict]]:
    """The round's verifiable verdicts, and each record refused with its reason."""
    out: list[Verdict] = []
    refused: list[RefusedVerdict] = []
    for position, item in enumerate(verdicts):
        raw = item.envelope if isinstance(item, VerdictRecord) else item
        verdict_id = item.verdict_id if isinstance(item, VerdictRecord) else ""
        try:
            env = open_envelope(raw, domain="verdict", run_id=run_id)
            body = Verdict.model_validate(env.body)
        except (EnvelopeError, ValidationError) as exc:
            reason = str(exc).splitlines()[0][:512]
            refused.append(RefusedVerdict(position, verdict_id, reason))  # = no verdict
        else:
            if body.round == index:
                out.append(body)
    return out, refused


def faulty_hotkeys(verdicts: Iterable[Any], run_id: str, index: int) -> set[str]:
    """Islands with a signed verdict other than ``match`` for this round."""
    return {v.hotkey for v in _verdicts(verdicts, run_id, index)[0] if v.result != "match"}


def proven_hotkeys(verdicts: Iterable[Any], run_id: str, index: int) -> set[str]:
    """Islands whose update a ``match`` verdict checked (and no other verdict faulted)."""
    found = _verdicts(verdicts, run_id, index)[0]
    bad = {v.hotkey for v in found if v.result != "match"}
    return {v.hotkey for v in found if v.result == "match" and v.update_checked} - bad


def assigned_hotkeys(assignments: Iterable[Any], manifest: RunManifest, index: int) -> set[str]:
    """Islands the coordinator assigned an audit in this round (signed assignments only)."""
    out: set[str] = set()
    for raw in assignments:
        try:
            env = open_envelope(raw, domain="audit-assignment", run_id=manifest.run_id)
            body = AuditAssignment.model_validate(env.body)
        except (EnvelopeError, ValidationError) as exc:
            raise ServiceError(f"round {index}: bad audit assignment: {exc}") from None
        if manifest.coordinator and env.signer != manifest.coordinator:
            raise ServiceError(f"round {index}: an assignment not signed by the coordinator")
        if body.round == index:
            out.add(body.hotkey)
    return out


def _commit(raw: Any, run_id: str) -> tuple[str, Commit | None, str]:
    signer = raw.signer if isinstance(raw, Envelope) else "?"
    try:
        env = open_envelope(raw, domain="commit", run_id=run_id)
        return env.signer, Commit.model_validate(env.body), ""
    except (EnvelopeError, ValidationError) as exc:
        return signer, None, str(exc).splitlines()[0]


def collect(
    detail: RoundDetail, manifest: RunManifest, index: int, stale: frozenset[str] = frozenset()
) -> Collected:
    """Candidates and collect-stage exclusions of round ``index`` from its record."""
    opened = verify_round_open(detail.open, manifest, index)
    found, refused = _verdicts(detail.verdicts, manifest.run_id, index)
    faulty = {v.hotkey for v in found if v.result != "match"}
    proven = proven_hotkeys(detail.verdicts, manifest.run_id, index)
    pending = assigned_hotkeys(detail.assignments, manifest, index) - {v.hotkey for v in found}
    order = {str(h): i for i, h in enumerate(detail.commit_order)}
    candidates: list[Candidate] = []
    excluded: list[Excluded] = []
    seen: set[str] = set()
    for raw in detail.commits:
        hotkey, body, problem = _commit(raw, manifest.run_id)
        sha = body.update_sha256 if body else "0" * 64
        tokens = body.tokens if body else 0
        reason = "bad_commit" if body is None else ""
        if body is not None and body.round != index:
            reason, problem = "wrong_round", f"commit is for round {body.round}, not {index}"
        elif body is not None and hotkey in faulty:
            reason, problem = "audit_mismatch", "an auditor's replay did not match the commit"
        elif body is not None and hotkey in pending:
            reason, problem = "audit_pending", "its assigned audit has no verifiable verdict"
        elif body is not None and sha in stale:
            reason, problem = "stale_update", "this update was already merged in an earlier round"
        elif hotkey in seen:
            reason, problem = "duplicate", "a second commit from the same island"
        if reason:
            excluded.append(
                Excluded(hotkey=hotkey, update_sha256=sha, tokens=tokens, stage="collect",
                         reason=reason, detail=problem[:2048])
            )  # fmt: skip
            continue
        assert body is not None
        seen.add(hotkey)
        candidates.append(
            Candidate(hotkey=hotkey, update_sha256=sha, tokens=tokens,
                      update_bytes=body.update_bytes, seq=order.get(hotkey, len(order)))
        )  # fmt: skip
    merged = {c.hotkey for c in candidates}
    return Collected(
        index, opened.start_model_sha256, candidates, excluded, sorted(proven & merged), refused
    )
