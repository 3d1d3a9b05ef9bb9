"""What the aggregator must rebase, read from the service's structured records.

Two things make a merged chain stale, and :func:`plan` finds both:

* a **proven fault** of a merged update: ``GET /v1/runs/{run}/faults`` lists it with
  ``rollback_due`` while the round's current tape still includes it; the chain to
  rebase runs from the earliest such round to the latest merged one;
* a round **merged on a superseded model**: a round that opened before a rollback
  trains and merges on the old model (the service holds a merge to its round's signed
  start model), so once merged it is replayed onto its predecessor's corrected model.

The tapes come from the relay by the hashes the service's records name (the latest
``merge-correction`` of a round, else its ``merge-tape``), so an aggregator that lost
its state directory rebases the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.challenge.client import ChallengeClient
from hypertrain.challenge.models import RoundDetail
from hypertrain.protocol.messages import FaultRef, MergeCorrection


@dataclass(frozen=True)
class RebasePlan:
    chain: list[Tape]  # current tapes of consecutive merged rounds, oldest first
    faulty: dict[int, set[str]]  # round -> hotkeys whose merged update is proven faulty
    cited: list[FaultRef]  # the proven faults the corrections answer


def _tape(detail: RoundDetail, blobs: BlobSource) -> Tape | None:
    current = detail.current_merge()
    return decode_tape(blobs.get(current.tape_sha256)) if current else None


def _chain(
    service: ChallengeClient, blobs: BlobSource, run_id: str, rounds: list[int]
) -> tuple[list[Tape], list[RoundDetail]]:
    details = [service.round_detail(run_id, r) for r in rounds]
    tapes = [t for t in (_tape(d, blobs) for d in details) if t is not None]
    return tapes, details


def _cited_by(detail: RoundDetail) -> list[FaultRef]:
    """The faults the round's latest correction answered (none without a correction)."""
    if not detail.corrections:
        return []
    return list(MergeCorrection.model_validate(detail.corrections[-1].body).faults)


def plan(
    service: ChallengeClient, blobs: BlobSource, run_id: str, just_merged: int | None
) -> RebasePlan | None:
    """The rebase the service's records call for now, or None."""
    merged = [s.round for s in service.rounds(run_id) if s.new_model_sha256]
    due = [f for f in service.proven_faults(run_id) if f.rollback_due]
    if due:
        first = min(f.round for f in due)
        chain, _ = _chain(service, blobs, run_id, [r for r in merged if r >= first])
        faulty: dict[int, set[str]] = {}
        for f in due:
            faulty.setdefault(f.round, set()).add(f.hotkey)
        cited = [FaultRef(round=f.round, hotkey=f.hotkey) for f in due]
        return RebasePlan(chain, faulty, cited)
    earlier = [r for r in merged if just_merged is not None and r < just_merged]
    if just_merged is None or not earlier:
        return None
    chain, details = _chain(service, blobs, run_id, [earlier[-1], just_merged])
    if len(chain) != 2 or chain[1].start_model_sha256 == chain[0].new_model_sha256:
        return None
    cited = _cited_by(details[0])
    return RebasePlan(chain, {}, cited) if cited else None
