"""The public records a merge stands on, each verified through :mod:`hypertrain.evidence`.

One verification library for every role: the aggregator and the tape witness (which
must reach the same collect-stage exclusions) check the run manifest, a round's open
record, its audit assignments, commits and verdicts with the functions an island and
an auditor use (:mod:`hypertrain.evidence.verify`), never with checks of their own.
What each refusal means here:

* the manifest, the round-open record or an assignment (the coordinator's) that does
  not verify raises :class:`~hypertrain.evidence.errors.VerificationError`: the round
  cannot be decided on it. A manifest that names no coordinator, with none pinned, is
  :class:`~hypertrain.evidence.errors.CoordinatorError`, a configuration error that
  ends the role;
* a commit that does not verify is excluded with its code (:class:`CheckedCommit`:
  ``bad_commit``, or ``wrong_round`` for a well-signed commit of another round);
* a verdict that does not verify is recorded as refused with its reason
  (:class:`RefusedVerdict`) and counts as no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from hypertrain.api.models import RoundDetail, VerdictRecord
from hypertrain.evidence.errors import CommitRoundError, VerificationError
from hypertrain.evidence.verify import (
    verify_assignment,
    verify_commit,
    verify_manifest,
    verify_round_open,
    verify_verdict,
)
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import Commit, RoundOpen, Verdict

CommitRefusal = Literal["bad_commit", "wrong_round"]


class ManifestSource(Protocol):
    def manifest_envelope(self, run_id: str) -> object:
        """The run's signed manifest envelope, as served."""
        ...


def run_manifest(service: ManifestSource, run_id: str, coordinator: str | None) -> RunManifest:
    """The run manifest, verified by :func:`~hypertrain.evidence.verify.verify_manifest`
    (``coordinator``: the pinned SS58, or None to take the manifest's own field)."""
    return verify_manifest(service.manifest_envelope(run_id), run_id, coordinator)


def round_open(detail: RoundDetail, manifest: RunManifest, index: int) -> RoundOpen:
    """Round ``index``'s open record, signed by the run's coordinator."""
    return verify_round_open(detail.open, manifest, index)


def assigned_segments(
    detail: RoundDetail, manifest: RunManifest, index: int
) -> dict[str, frozenset[int]]:
    """hotkey -> segments, for every audit the coordinator assigned in round ``index``."""
    out: dict[str, frozenset[int]] = {}
    for raw in detail.assignments:
        body = verify_assignment(raw, manifest, index)
        out[body.hotkey] = frozenset(body.segments)
    return out


@dataclass(frozen=True, slots=True)
class RefusedVerdict:
    """A verdict record that did not verify: no verdict, with the reason why."""

    position: int  # its index in the round record's ``verdicts``
    verdict_id: str
    reason: str


def verdicts(
    detail: RoundDetail, manifest: RunManifest, index: int, assigned: dict[str, frozenset[int]]
) -> tuple[list[Verdict], list[RefusedVerdict]]:
    """Round ``index``'s verified verdicts (on the audits ``assigned`` names), and each
    record refused with its reason."""
    out: list[Verdict] = []
    refused: list[RefusedVerdict] = []
    for position, item in enumerate(detail.verdicts):
        raw = item.envelope if isinstance(item, VerdictRecord) else item
        verdict_id = item.verdict_id if isinstance(item, VerdictRecord) else ""
        try:
            out.append(verify_verdict(raw, manifest, index, assigned))
        except VerificationError as exc:
            reason = str(exc).splitlines()[0][:512]
            refused.append(RefusedVerdict(position, verdict_id, reason))  # = no verdict
    return out, refused


@dataclass(frozen=True, slots=True)
class CheckedCommit:
    """One commit envelope of a round record, verified for that round."""

    hotkey: str  # the envelope's signer
    body: Commit | None  # its body where it parsed (verified, or for another round)
    refusal: CommitRefusal | None = None  # None: it verified
    detail: str = ""  # why it was refused

    @property
    def verified(self) -> Commit | None:
        """The commit, where it verified for the round."""
        return self.body if self.refusal is None else None


def check_commit(raw: Envelope, manifest: RunManifest, index: int) -> CheckedCommit:
    """A commit envelope checked by :func:`~hypertrain.evidence.verify.verify_commit`."""
    try:
        return CheckedCommit(raw.signer, verify_commit(raw, manifest, raw.signer, index))
    except CommitRoundError as exc:
        return CheckedCommit(raw.signer, exc.commit, "wrong_round", str(exc))
    except VerificationError as exc:
        return CheckedCommit(raw.signer, None, "bad_commit", str(exc).splitlines()[0])


def checked_commits(detail: RoundDetail, manifest: RunManifest, index: int) -> list[CheckedCommit]:
    """Every commit of the round record, checked for round ``index``, in record order."""
    return [check_commit(raw, manifest, index) for raw in detail.commits]


def commit_refusals(
    detail: RoundDetail, manifest: RunManifest, index: int
) -> dict[str, frozenset[CommitRefusal]]:
    """hotkey -> the codes its commits of round ``index`` were refused with."""
    out: dict[str, set[CommitRefusal]] = {}
    for checked in checked_commits(detail, manifest, index):
        if checked.refusal is not None:
            out.setdefault(checked.hotkey, set()).add(checked.refusal)
    return {hotkey: frozenset(codes) for hotkey, codes in out.items()}
