"""Recompute a merge from its tape (``verify-tape``) and roll a faulty update back out.

:func:`verify_tape` rebuilds the merge inputs from the tape alone (manifest, start
model, previous outer state, candidates, collect-stage exclusions), runs the same
:func:`~hypertrain.aggregator.merge.merge`, and compares the recomputed tape with the
published one field by field; the model and outer-state bytes are compared through
their hashes, which the tape carries. The first difference is reported by path.

:mod:`hypertrain.aggregator.rebase` answers a fault proven after the merge (the
round without the faulty update, and every later round replayed on top of it); its
corrected tapes are verified by the same :func:`verify_tape`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.sketch import SketchCache
from hypertrain.aggregator.tape import Tape
from hypertrain.protocol.exclusions import COLLECT_REASONS


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
        earlier=list(tape.earlier),
        older=list(tape.older),
        updates_by_round=tape.updates_by_round,
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


def misstaged(tape: Tape) -> str | None:
    """The first collect-stage exclusion whose code is a screen's (``near_duplicate``,
    ``missing_blob``, ...): the recomputation takes collect-stage exclusions as inputs, so
    a screen's code there would leave an island out without anyone recomputing why."""
    for i, e in enumerate(tape.excluded):
        if e.stage == "collect" and e.reason not in COLLECT_REASONS:
            return (
                f"tape.excluded[{i}].reason: {e.reason!r} at the collect stage, where only a"
                " fact of the public round record stands; a screen's reason is recomputed"
            )
    return None


def verify_tape(tape: Tape, blobs: BlobSource, sketches: SketchCache | None = None) -> VerifyReport:
    """Recompute the merge the tape describes and compare every field (``sketches``: a
    run sketch cache kept across tapes, so a follower projects each update once); a
    screen's exclusion code given at the collect stage is a difference (:func:`misstaged`)."""
    inputs = inputs_from_tape(tape)
    if sketches is not None:
        inputs = dataclasses.replace(inputs, sketches=sketches)
    result = merge(inputs, blobs)
    diff = misstaged(tape) or first_difference(
        tape.model_dump(mode="json"), result.tape.model_dump(mode="json")
    )
    return VerifyReport(diff is None, diff, result)
