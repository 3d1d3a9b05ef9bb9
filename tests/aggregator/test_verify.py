"""verify-tape recomputation, tamper detection, persistent momentum, rollback equality."""

from __future__ import annotations

import dataclasses

import pytest

from hypertrain.aggregator.errors import TapeError
from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.rebase import rollback
from hypertrain.aggregator.tape import Excluded, Tape, decode_tape
from hypertrain.aggregator.verify import misstaged, verify_tape
from tests.aggregator.helpers import HOTKEYS, World


def _world(n: int = 4) -> World:
    w = World()
    for i in range(n):
        w.add(i, tokens=50 + 40 * i)
    return w


def _tampered(tape: Tape, **changes: object) -> Tape:
    return Tape.model_validate({**tape.model_dump(mode="json"), **changes})


def test_verify_reproduces_the_merge() -> None:
    w = _world()
    result = merge(w.inputs(), w.blobs)
    tape = decode_tape(result.tape.to_bytes())
    report = verify_tape(tape, w.blobs)
    assert report.identical and report.first_difference is None
    assert report.recomputed.model_blob == result.model_blob


def test_verify_detects_a_tampered_tape() -> None:
    w = _world()
    tape = merge(w.inputs(), w.blobs).tape
    included = [i.model_dump(mode="json") for i in tape.included]
    included[1]["weight"] = included[1]["weight"] + 1e-9
    report = verify_tape(_tampered(tape, included=included), w.blobs)
    assert not report.identical
    assert report.first_difference is not None
    assert report.first_difference.startswith("tape.included[1].weight")
    forged = _tampered(tape, new_model_sha256="00" * 32)
    assert verify_tape(forged, w.blobs).first_difference == (
        f"tape.new_model_sha256: tape says {'00' * 32!r}, recomputed {tape.new_model_sha256!r}"
    )
    hidden = _tampered(tape, candidates=[c.model_dump() for c in tape.candidates[1:]])
    assert not verify_tape(hidden, w.blobs).identical


def test_a_screen_code_at_the_collect_stage_is_a_difference() -> None:
    """The merge takes collect-stage exclusions as inputs, so a tape that moves an island
    there under a screen's code (a relabel: tape, model and record all agree) would be
    recomputed identical; only a fact of the public round record may stand there."""
    w = _world()
    victim = w.candidates[0]
    kept = [c for c in w.candidates if c is not victim]
    for reason in ("near_duplicate", "missing_blob", "norm_outlier"):
        label = Excluded(hotkey=victim.hotkey, update_sha256=victim.update_sha256,
                         tokens=victim.tokens, stage="collect", reason=reason)  # fmt: skip
        inputs = dataclasses.replace(
            w.inputs(), candidates=kept, collect_excluded=[label],
            proven=[c.hotkey for c in kept],
        )  # fmt: skip
        tape = merge(inputs, w.blobs).tape
        report = verify_tape(tape, w.blobs)
        assert not report.identical
        assert report.first_difference == misstaged(tape)
        assert f"reason: {reason!r} at the collect stage" in (report.first_difference or "")
    stale = Excluded(hotkey=victim.hotkey, update_sha256=victim.update_sha256,
                     tokens=victim.tokens, stage="collect", reason="stale_update")  # fmt: skip
    inputs = dataclasses.replace(w.inputs(), candidates=kept, collect_excluded=[stale],
                                 proven=[c.hotkey for c in kept])  # fmt: skip
    assert verify_tape(merge(inputs, w.blobs).tape, w.blobs).identical  # the witness checks it


def test_decode_tape_refuses_garbage_and_a_wrong_manifest_digest() -> None:
    w = _world(2)
    tape = merge(w.inputs(), w.blobs).tape
    with pytest.raises(TapeError, match="not a valid merge tape"):
        decode_tape(b"{}")
    bad = _tampered(tape, manifest_digest="00" * 32)
    with pytest.raises(TapeError, match="manifest_digest"):
        decode_tape(bad.to_bytes())


def test_momentum_persists_into_the_next_round() -> None:
    w = _world(2)
    first = merge(w.inputs(), w.blobs)
    outer_sha = w.blobs.put(first.outer_blob, kind="outer_state", round=0)
    w.start_sha = w.blobs.put(first.model_blob, kind="model", round=0)
    w.candidates = []
    for i in range(2):
        w.add(i, seed=100 + i)
    with_momentum = merge(w.inputs(1, outer_sha), w.blobs)
    without = merge(w.inputs(1, None), w.blobs)
    assert with_momentum.tape.prev_outer_state_sha256 == outer_sha
    assert with_momentum.model_blob != without.model_blob
    assert verify_tape(with_momentum.tape, w.blobs).identical


def test_rollback_equals_a_merge_that_never_saw_the_update() -> None:
    w = _world(4)
    tape = merge(w.inputs(), w.blobs).tape
    rolled = rollback(tape, HOTKEYS[2], w.blobs)
    w.candidates = [c for c in w.candidates if c.hotkey != HOTKEYS[2]]
    never = merge(w.inputs(), w.blobs)
    assert rolled.model_blob == never.model_blob
    assert rolled.outer_blob == never.outer_blob
    assert rolled.tape.rollback_of == tape.sha256()
    assert [e.reason for e in rolled.tape.excluded] == ["rolled_back"]
    assert verify_tape(rolled.tape, w.blobs).identical
    with pytest.raises(TapeError, match="no update"):
        rollback(tape, "5" * 48, w.blobs)
