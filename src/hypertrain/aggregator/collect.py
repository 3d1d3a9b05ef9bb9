"""Collection: which committed updates of a round are offered to the merge.

Input is the service's public round record (``GET /v1/runs/{run}/rounds/{w}``).
Nothing in it is trusted on the service's word: every record is verified through
:mod:`hypertrain.evidence`, the checks every role uses (:mod:`.records`): the round-open
record and the audit assignments must carry the run coordinator's signature (a run
that names no coordinator is refused), each commit the signature of the island it
names, each verdict an auditor's signature on an assigned audit. A commit is excluded
at this stage, with its reason, when

* it does not verify (``bad_commit``: signature, run, body, leaf count) or it names
  another round (``wrong_round``);
* a verified verdict of an auditor for that island in this round is anything but
  ``match`` (``audit_mismatch``: a mismatch or an unverifiable input), the same rule
  the service's settlement uses;
* the coordinator assigned it an audit and no verified verdict exists
  (``audit_pending``): "no verdict" never means "merged" (settlement holds its
  reward until a verdict exists);
* it re-submits an update already merged in an earlier round (``stale_update``).

A verdict record that does not verify (signature, run, round, body, an audit that was
not assigned, segments that were not) is not dropped silently: it is recorded in
``Collected.refused_verdicts`` with its reason and counts as no verdict. Collection
also reports which islands an audit *proved* this round (a ``match`` verdict that
checked the update itself): their norms anchor the merge's reference norm. Each
candidate carries its commit's arrival position (the service's ``commit_order``), so
the merge keeps the earliest of two copies.

The update is addressed by ``Commit.update_sha256``: the plain SHA-256 of the
encoded update, which is also its relay address.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypertrain.aggregator import records
from hypertrain.aggregator.records import RefusedVerdict
from hypertrain.aggregator.tape import Candidate, Excluded
from hypertrain.api.models import RoundDetail
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import RunManifest


@dataclass(frozen=True)
class Audits:
    """What a round's verified assignments and verdicts say of its islands."""

    assigned: frozenset[str]  # the coordinator assigned them an audit
    judged: frozenset[str]  # a verified verdict of them exists
    faulty: frozenset[str]  # a verified verdict of them is not ``match``
    proven: frozenset[str]  # a ``match`` verdict checked their update, none faulted them
    refused: list[RefusedVerdict] = field(default_factory=list)


def audits(detail: RoundDetail, manifest: RunManifest, index: int) -> Audits:
    """Round ``index``'s audits from its record (:mod:`.records`, through evidence)."""
    assigned = records.assigned_segments(detail, manifest, index)
    found, refused = records.verdicts(detail, manifest, index, assigned)
    faulty = frozenset(v.hotkey for v in found if v.result != "match")
    checked = frozenset(v.hotkey for v in found if v.result == "match" and v.update_checked)
    judged = frozenset(v.hotkey for v in found)
    return Audits(frozenset(assigned), judged, faulty, checked - faulty, refused)


def faulty_hotkeys(detail: RoundDetail, manifest: RunManifest) -> frozenset[str]:
    """Islands of the round that a verified verdict other than ``match`` faults."""
    return audits(detail, manifest, detail.round).faulty


@dataclass(frozen=True)
class Collected:
    round: int
    start_model_sha256: str
    candidates: list[Candidate]
    excluded: list[Excluded]
    proven: list[str] = field(default_factory=list)
    refused_verdicts: list[RefusedVerdict] = field(default_factory=list)


def _exclusion(
    checked: records.CheckedCommit, found: Audits, stale: frozenset[str], seen: set[str]
) -> tuple[ExclusionReason | None, str]:
    """The collect-stage code of one checked commit and its detail (None: a candidate)."""
    hotkey, body = checked.hotkey, checked.body
    if checked.refusal is not None or body is None:
        return checked.refusal or "bad_commit", checked.detail
    if hotkey in found.faulty:
        return "audit_mismatch", "an auditor's replay did not match the commit"
    if hotkey in found.assigned - found.judged:
        return "audit_pending", "its assigned audit has no verifiable verdict"
    if body.update_sha256 in stale:
        return "stale_update", "this update was already merged in an earlier round"
    if hotkey in seen:
        return "duplicate", "a second commit from the same island"
    return None, ""


def collect(
    detail: RoundDetail, manifest: RunManifest, index: int, stale: frozenset[str] = frozenset()
) -> Collected:
    """Candidates and collect-stage exclusions of round ``index`` from its record."""
    opened = records.round_open(detail, manifest, index)
    found = audits(detail, manifest, index)
    order = {str(h): i for i, h in enumerate(detail.commit_order)}
    candidates: list[Candidate] = []
    excluded: list[Excluded] = []
    seen: set[str] = set()
    for checked in records.checked_commits(detail, manifest, index):
        hotkey, body = checked.hotkey, checked.body
        sha = body.update_sha256 if body else "0" * 64
        tokens = body.tokens if body else 0
        reason, problem = _exclusion(checked, found, stale, seen)
        if reason is not None:
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
    proven = sorted(found.proven & merged)
    return Collected(index, opened.start_model_sha256, candidates, excluded, proven, found.refused)
