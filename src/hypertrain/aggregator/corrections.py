"""What the aggregator must rebase, read from the service's structured records.

``GET /v1/runs/{run}/faults`` lists every proven fault with ``rollback_due`` while the
faulty update is still in its round's current tape, or while a later merged round
still starts from a model a correction superseded (a round that opened before the
rollback trains and merges on the old model, since the service holds a merge to its
round's signed start model; or a rebase was interrupted). :func:`plan` turns the due
faults into the chain to rebase: the current tapes of every merged round from the
earliest due fault on. :func:`~hypertrain.aggregator.rebase.rebase` leaves the rounds
that need nothing untouched.

The tapes come from the relay by the hashes the service's records name (the latest
``merge-correction`` of a round, else its ``merge-tape``), so an aggregator that lost
its state directory rebases the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RoundDetail
from hypertrain.protocol.messages import FaultRef


@dataclass(frozen=True)
class RebasePlan:
    chain: list[Tape]  # current tapes of consecutive merged rounds, oldest first
    faulty: dict[int, set[str]]  # round -> hotkeys whose merged update is proven faulty
    cited: list[FaultRef]  # the proven faults the corrections answer


def _tape(detail: RoundDetail, blobs: BlobSource) -> Tape | None:
    current = detail.current_merge()
    return decode_tape(blobs.get(current.tape_sha256)) if current else None


def plan(service: ChallengeClient, blobs: BlobSource, run_id: str) -> RebasePlan | None:
    """The rebase the service's proven faults call for now, or None."""
    due = [f for f in service.proven_faults(run_id) if f.rollback_due]
    if not due:
        return None
    first = min(f.round for f in due)
    merged = [s.round for s in service.rounds(run_id) if s.new_model_sha256 and s.round >= first]
    tapes = (_tape(service.round_detail(run_id, r), blobs) for r in merged)
    faulty: dict[int, set[str]] = {}
    for f in due:
        faulty.setdefault(f.round, set()).add(f.hotkey)
    cited = [FaultRef(round=f.round, hotkey=f.hotkey) for f in due]
    return RebasePlan([t for t in tapes if t is not None], faulty, cited)
