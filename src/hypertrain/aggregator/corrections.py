"""What the aggregator must rebase, read from the service's structured records.

``GET /v1/runs/{run}/faults`` lists every proven fault with ``rollback_due`` while the
faulty update is still in its round's current tape, or while a later merged round
still starts from a model a correction superseded (a round that opened before the
rollback trains and merges on the old model, since the service holds a merge to its
round's signed start model; or a rebase was interrupted). :func:`plan` turns the due
faults into the chain to rebase: the current tapes of every merged round from the
earliest due fault on. :func:`~hypertrain.aggregator.rebase.rebase` leaves the rounds
that need nothing untouched.

Each corrected round cites the due faults
:func:`~hypertrain.protocol.citations.cited_by` gives it (:meth:`RebasePlan.cited`), the
rule the service checks, so any number of faults due at once is one pass.

The tapes come from the relay by the hashes the service's records name (the latest
``merge-correction`` of a round, else its ``merge-tape``), so an aggregator that lost
its state directory rebases the same way. The plan is derived afresh at every try: a
correction the service refused is never re-sent as it was, and :class:`Backoff` spaces
the tries so that a refusal never holds up the rounds (the runner opens them first).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RoundDetail
from hypertrain.protocol.citations import cited_by
from hypertrain.protocol.messages import FaultRef


@dataclass(frozen=True)
class RebasePlan:
    chain: list[Tape]  # current tapes of consecutive merged rounds, oldest first
    faulty: dict[int, set[str]]  # round -> hotkeys whose merged update is proven faulty
    due: list[FaultRef]  # the proven faults due for a rollback, oldest round first

    def cited(self, index: int) -> list[FaultRef]:
        """The due faults the correction of round ``index`` cites."""
        return cited_by(self.due, index)


def _tape(detail: RoundDetail, blobs: BlobSource) -> Tape | None:
    current = detail.current_merge()
    return decode_tape(blobs.get(current.tape_sha256)) if current else None


def plan(service: ChallengeClient, blobs: BlobSource, run_id: str) -> RebasePlan | None:
    """The rebase the service's proven faults call for now, or None."""
    due = sorted((f for f in service.proven_faults(run_id) if f.rollback_due),
                 key=lambda f: (f.round, f.hotkey))  # fmt: skip
    if not due:
        return None
    first = min(f.round for f in due)
    merged = [s.round for s in service.rounds(run_id) if s.new_model_sha256 and s.round >= first]
    tapes = (_tape(service.round_detail(run_id, r), blobs) for r in merged)
    chain = [t for t in tapes if t is not None]
    faulty: dict[int, set[str]] = {}
    for f in due:
        faulty.setdefault(f.round, set()).add(f.hotkey)
    cited = [FaultRef(round=f.round, hotkey=f.hotkey) for f in due]
    return RebasePlan(chain, faulty, cited)


@dataclass
class Backoff:
    """When the next correction may be tried: after ``refusals`` refusals in a row, wait
    ``base_s * 2**(refusals - 1)`` seconds, at most ``cap_s``; a success resets it."""

    base_s: float = 2.0
    cap_s: float = 120.0
    refusals: int = 0
    not_before: float = 0.0  # monotonic seconds

    def ready(self, now: float) -> bool:
        return now >= self.not_before

    def refused(self, now: float) -> float:
        """Record a refusal at ``now``; returns the seconds until the next try."""
        wait = min(self.cap_s, self.base_s * 2.0 ** min(self.refusals, 32))
        self.refusals += 1
        self.not_before = now + wait
        return wait

    def succeeded(self) -> None:
        self.refusals, self.not_before = 0, 0.0
