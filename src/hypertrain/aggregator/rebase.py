"""Automatic rollback with rebase: undo a proven-faulty update and replay what followed.

A fault proven after its round was merged leaves the faulty update in the shared model
and in every model merged after it. :func:`rebase` answers it from the signed tapes and
the relay's blobs alone:

1. the faulty round is recomputed without the faulty island's update (moved to the
   collect-stage exclusions as ``rolled_back``; median, clip factors and weights are
   recomputed over the rest), from the same start model and outer state;
2. every later merged round is replayed: its tape's candidates and collect-stage
   exclusions are kept, its start model and previous outer state become the corrected
   predecessor's, and its reference history is recomputed from the corrected chain
   (the proven norms of the corrected tapes, newest first, then the norms that were
   already before the first corrected round, ``chain[0].history_norms``), and so are
   the earlier rounds' public updates it is screened against (``Tape.earlier``: the
   corrected tapes' included updates, then ``chain[0].earlier`` for rounds before it).

Each corrected tape names the tape it supersedes (``rollback_of``), so ``verify-tape``
recomputes it like any other. Because :func:`~hypertrain.aggregator.merge.merge` is a
bitwise function of its inputs and no input of a replayed round depends on the
excluded update except through the model, the outer state and the history, the
corrected chain is byte for byte the chain a merge that never saw the update would
have produced (``tests/aggregator/test_rebase.py``).

:func:`check_correction` is the verifier's side: a published corrected chain must be
exactly the recomputation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from hypertrain.aggregator.aggregate import earlier_updates
from hypertrain.aggregator.availability import ArrivalSource
from hypertrain.aggregator.blobs import BlobSource, check_hash
from hypertrain.aggregator.errors import AggregatorError, TapeError
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.screen import HISTORY_NORMS, proven_history
from hypertrain.aggregator.tape import Earlier, Excluded, Tape
from hypertrain.aggregator.verify import first_difference, inputs_from_tape


@dataclass(frozen=True)
class Correction:
    """One corrected round: the tape it supersedes and the recomputed merge."""

    supersedes: Tape
    result: MergeResult


class _Overlay:
    """The corrected predecessor's model and outer state, before anything is published."""

    def __init__(self, base: BlobSource) -> None:
        self.base = base
        self.held: dict[str, bytes] = {}

    def hold(self, result: MergeResult) -> None:
        self.held = {
            result.tape.new_model_sha256: result.model_blob,
            result.tape.new_outer_state_sha256: result.outer_blob,
        }

    def get(self, sha256: str) -> bytes:
        data = self.held.get(sha256)
        return check_hash(sha256, data) if data is not None else self.base.get(sha256)

    def arrival_round(self, sha256: str) -> int | None:
        """The base's arrival record (updates are never held here)."""
        return self._records().arrival_round(sha256)

    def clock_round(self) -> int:
        return self._records().clock_round()

    def _records(self) -> ArrivalSource:
        if not isinstance(self.base, ArrivalSource):
            raise AggregatorError("this blob source keeps no arrival record (needed by the tape)")
        return self.base


def _dropped(tape: Tape, drop: Collection[str]) -> list[Excluded]:
    return [
        Excluded(
            hotkey=c.hotkey, update_sha256=c.update_sha256, tokens=c.tokens, stage="collect",
            reason="rolled_back", detail=f"fault proven after the merge of tape {tape.sha256()}",
        )
        for c in tape.candidates if c.hotkey in drop
    ]  # fmt: skip


def corrected_inputs(
    tape: Tape,
    drop: Collection[str],
    prev: Tape | None,
    history: list[float],
    earlier: list[Earlier] | None = None,
) -> MergeInputs:
    """``tape``'s merge without ``drop``, on top of the corrected predecessor ``prev``."""
    base = inputs_from_tape(tape)
    return MergeInputs(
        manifest=base.manifest,
        round=base.round,
        start_model_sha256=prev.new_model_sha256 if prev else base.start_model_sha256,
        prev_outer_state_sha256=prev.new_outer_state_sha256
        if prev
        else base.prev_outer_state_sha256,
        candidates=[c for c in base.candidates if c.hotkey not in drop],
        collect_excluded=[*base.collect_excluded, *_dropped(tape, drop)],
        rollback_of=tape.sha256(),
        history_norms=history,
        proven=[h for h in base.proven if h not in drop],
        earlier=base.earlier if earlier is None else earlier,
        older=base.older,  # the public updates it was screened against stay public
        updates_by_round=base.updates_by_round,  # the same availability, by the same record
    )


def _stale(tape: Tape, prev: Tape | None, history: list[float], earlier: list[Earlier]) -> bool:
    """Whether ``tape`` was merged on something other than its (corrected) predecessor."""
    if prev is None:
        return False
    return (
        tape.start_model_sha256 != prev.new_model_sha256
        or tape.prev_outer_state_sha256 != prev.new_outer_state_sha256
        or list(tape.history_norms) != history
        or list(tape.earlier) != earlier
    )


def _check_chain(chain: Sequence[Tape], faulty: Mapping[int, Collection[str]]) -> None:
    if not chain:
        raise TapeError("a rebase needs at least the faulty round's tape")
    rounds = [t.round for t in chain]
    if rounds != sorted(set(rounds)) or len({t.run_id for t in chain}) != 1:
        raise TapeError("the chain must be one run's tapes in increasing round order")
    for index, hotkeys in faulty.items():
        tape = next((t for t in chain if t.round == index), None)
        known = (
            {c.hotkey for c in tape.candidates} | {e.hotkey for e in tape.excluded}
            if tape
            else set()
        )
        missing = set(hotkeys) - known  # an update already rolled back is an exclusion
        if missing:
            raise TapeError(f"{sorted(missing)} have no update among round {index}'s candidates")


def rebase(
    chain: Sequence[Tape], faulty: Mapping[int, Collection[str]], blobs: BlobSource
) -> list[Correction]:
    """Corrections for ``chain`` (current tapes of consecutive merged rounds, oldest first)
    once the updates ``faulty`` names (round -> hotkeys) are proven faulty.

    A round is recomputed when it included a faulty update or when its predecessor was
    corrected; untouched rounds are left as they are (and get no correction).
    """
    _check_chain(chain, faulty)
    before = list(chain[0].history_norms)  # proven norms of rounds before the chain
    current: list[Tape] = []
    out: list[Correction] = []
    source = _Overlay(blobs)
    for tape in chain:
        history = _history(current, before) if current else before
        # a tape merged without earlier updates (an older aggregator) is replayed without
        earlier = list(tape.earlier)
        if current and earlier:
            earlier = earlier_updates(reversed(current), tape.round, chain[0].earlier)
        prev = current[-1] if current else None
        drop = set(faulty.get(tape.round, ())) & {i.hotkey for i in tape.included}
        if not drop and not _stale(tape, prev, history, earlier):
            current.append(tape)
            continue
        result = merge(corrected_inputs(tape, drop, prev, history, earlier), source)
        source.hold(result)
        out.append(Correction(tape, result))
        current.append(result.tape)
    return out


def rollback(tape: Tape, faulty_hotkey: str, blobs: BlobSource) -> MergeResult:
    """Round ``tape.round`` recomputed without ``faulty_hotkey``'s update (no later rounds)."""
    if faulty_hotkey not in {c.hotkey for c in tape.candidates}:
        raise TapeError(f"{faulty_hotkey} has no update among the tape's candidates")
    return merge(corrected_inputs(tape, {faulty_hotkey}, None, list(tape.history_norms)), blobs)


def _history(current: Sequence[Tape], before: list[float]) -> list[float]:
    return (proven_history(reversed(current)) + before)[:HISTORY_NORMS]


def check_correction(
    chain: Sequence[Tape],
    faulty: Mapping[int, Collection[str]],
    published: Sequence[Tape],
    blobs: BlobSource,
) -> str | None:
    """The first difference between ``published`` corrected tapes and the recomputation
    (None when they are identical, round for round)."""
    expected = [c.result.tape for c in rebase(chain, faulty, blobs)]
    if [t.round for t in expected] != [t.round for t in published]:
        return (
            f"corrections for rounds {[t.round for t in published]},"
            f" recomputed {[t.round for t in expected]}"
        )
    for want, got in zip(expected, published, strict=True):
        diff = first_difference(got.model_dump(mode="json"), want.model_dump(mode="json"))
        if diff is not None:
            return f"round {want.round}: {diff}"
    return None
