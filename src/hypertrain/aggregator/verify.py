"""Recompute a merge from its tape (``verify-tape``) and roll a faulty update back out.

:func:`verify_tape` rebuilds the merge inputs from the tape alone (manifest, start
model, previous outer state, candidates, collect-stage exclusions), runs the same
:func:`~hypertrain.aggregator.merge.merge`, and compares the recomputed tape with the
published one field by field; the model and outer-state bytes are compared through
their hashes, which the tape carries. The first difference is reported by path.

:func:`rollback` answers a fault proven after the merge: it recomputes the round from
the same start model and outer state with the faulty island's update moved to the
collect-stage exclusions. Since the median, weights and clip factors are all
recomputed over the remaining candidates, the new model and outer state are exactly
the bytes of a merge that never saw that update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.errors import TapeError
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.tape import Excluded, Tape


@dataclass(frozen=True)
class VerifyReport:
    identical: bool
    first_difference: str | None
    recomputed: MergeResult


def inputs_from_tape(tape: Tape) -> MergeInputs:
    return MergeInputs(
        manifest=tape.manifest,
        round=tape.round,
        start_model_sha256=tape.start_model_sha256,
        prev_outer_state_sha256=tape.prev_outer_state_sha256,
        candidates=list(tape.candidates),
        collect_excluded=[e for e in tape.excluded if e.stage == "collect"],
        rollback_of=tape.rollback_of,
        history_norms=list(tape.history_norms),
        proven=list(tape.proven),
    )


def first_difference(expected: Any, actual: Any, path: str = "tape") -> str | None:
    """The path of the first value that differs between two JSON documents."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in list(expected) + [k for k in actual if k not in expected]:
            if key not in expected or key not in actual:
                return f"{path}.{key}: present in only one of the two"
            found = first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: {len(expected)} entries in the tape, {len(actual)} recomputed"
        return None
    if expected != actual or type(expected) is not type(actual):
        return f"{path}: tape says {expected!r}, recomputed {actual!r}"
    return None


def verify_tape(tape: Tape, blobs: BlobSource) -> VerifyReport:
    """Recompute the merge the tape describes and compare every field."""
    result = merge(inputs_from_tape(tape), blobs)
    diff = first_difference(tape.model_dump(mode="json"), result.tape.model_dump(mode="json"))
    return VerifyReport(diff is None, diff, result)


def rollback(tape: Tape, faulty_hotkey: str, blobs: BlobSource) -> MergeResult:
    """Round ``tape.round`` recomputed without ``faulty_hotkey``'s update."""
    faulty = [c for c in tape.candidates if c.hotkey == faulty_hotkey]
    if not faulty:
        raise TapeError(f"{faulty_hotkey} has no update among the tape's candidates")
    base = inputs_from_tape(tape)
    dropped = Excluded(
        hotkey=faulty_hotkey,
        update_sha256=faulty[0].update_sha256,
        tokens=faulty[0].tokens,
        stage="collect",
        reason="rolled_back",
        detail=f"fault proven after the merge of tape {tape.sha256()}",
    )
    inputs = MergeInputs(
        manifest=base.manifest,
        round=base.round,
        start_model_sha256=base.start_model_sha256,
        prev_outer_state_sha256=base.prev_outer_state_sha256,
        candidates=[c for c in base.candidates if c.hotkey != faulty_hotkey],
        collect_excluded=[*base.collect_excluded, dropped],
        rollback_of=tape.sha256(),
        history_norms=base.history_norms,
        proven=[h for h in base.proven if h != faulty_hotkey],
    )
    return merge(inputs, blobs)
