"""The reference norm no minority can move, and copies merged once (real merge, real codec)."""

from __future__ import annotations

import hashlib

from hypertrain.aggregator.dedup import NEAR_DUPLICATE_COSINE, exact_cosine, sketch
from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.screen import QUORUM, reference_norm
from hypertrain.aggregator.verify import verify_tape
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import param_shapes
from tests.aggregator.helpers import HOTKEYS, World, delta


def _honest_only(w: World, *indices: int) -> str:
    """The model a merge of only these candidates produces."""
    alone = World()
    alone.candidates = [c for c in w.candidates if c.hotkey in {HOTKEYS[i] for i in indices}]
    alone.blobs = w.blobs
    return merge(alone.inputs(), alone.blobs).tape.new_model_sha256


def test_a_1000x_update_beside_one_proven_honest_update_is_rejected() -> None:
    w = World()
    w.add(0)  # honest, audited: match with the update checked
    w.add(1, scale=1.0)  # 1000x, not audited this round
    result = merge(w.inputs(proven=[HOTKEYS[0]]), w.blobs)
    tape = result.tape
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert {e.hotkey: e.reason for e in tape.excluded} == {HOTKEYS[1]: "norm_outlier"}
    assert tape.new_model_sha256 == _honest_only(w, 0)  # the 1000x did not steer the model
    assert verify_tape(tape, w.blobs).identical


def test_two_unproven_updates_without_history_merge_nothing() -> None:
    """Two decodable updates cannot set their own reference: neither is merged or paid."""
    w = World()
    w.add(0)
    w.add(1, scale=1.0)
    tape = merge(w.inputs(proven=[]), w.blobs).tape
    assert tape.included == []
    assert {e.reason for e in tape.excluded} == {"no_reference"}
    untouched = merge(World().inputs(proven=[]), w.blobs).tape.new_model_sha256
    assert tape.new_model_sha256 == untouched  # the model is kept as it was


def test_history_sets_the_reference_and_a_round_majority_cannot_move_it() -> None:
    w = World()
    w.add(0)
    honest_norm = merge(w.inputs(), w.blobs).tape.included[0].norm
    for i in (1, 2, 3):  # three of four updates this round are 1000x
        w.add(i, scale=1.0)
    tape = merge(w.inputs(proven=[], history_norms=[honest_norm] * 8), w.blobs).tape
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert tape.median_norm == honest_norm
    assert sorted(e.hotkey for e in tape.excluded) == sorted(HOTKEYS[1:4])
    assert verify_tape(tape, w.blobs).identical


def test_quorum_median_resists_a_minority_of_large_updates() -> None:
    w = World()
    for i in range(3):
        w.add(i)
    w.add(3, scale=1.0)
    w.add(4, scale=1.0)
    tape = merge(w.inputs(proven=[]), w.blobs).tape
    assert sorted(i.hotkey for i in tape.included) == sorted(HOTKEYS[:3])
    assert {e.hotkey for e in tape.excluded} == {HOTKEYS[3], HOTKEYS[4]}


def test_reference_rules() -> None:
    norms = {"a": 1.0, "b": 1000.0}
    assert reference_norm(norms, [], []) == (None, "none")
    assert reference_norm(norms, [], ["a"]) == (1.0, "trusted")
    assert reference_norm(norms, [2.0, 2.0, 2.0], ["b"]) == (2.0, "trusted")
    many = {str(i): 1.0 for i in range(QUORUM)}
    assert reference_norm(many, [], []) == (1.0, "quorum")


def test_a_copied_update_is_merged_once_and_the_earliest_commit_keeps_it() -> None:
    w = World()
    original = w.add(3)  # sorts after the copier's hotkey, but committed first
    data = w.blobs.get(original.update_sha256)
    copier = w.add(0, data=data)
    w.candidates = [original.model_copy(update={"seq": 0}), copier.model_copy(update={"seq": 1})]
    w.add(1)
    w.add(2)
    tape = merge(w.inputs(), w.blobs).tape
    assert HOTKEYS[3] in {i.hotkey for i in tape.included}
    assert {e.hotkey: e.reason for e in tape.excluded} == {HOTKEYS[0]: "duplicate_update"}
    assert tape.new_model_sha256 == _honest_only(w, 1, 2, 3)
    assert verify_tape(tape, w.blobs).identical


def test_a_rescaled_copy_is_a_near_duplicate() -> None:
    w = World()
    original = w.add(1)
    scaled = encode_int8(
        {k: v * 3.0 for k, v in delta(w.manifest, 1).items()}, w.manifest.compression.block_size
    )
    copier = w.add(0, data=scaled)
    assert copier.update_sha256 != original.update_sha256
    w.candidates = [original.model_copy(update={"seq": 0}), copier.model_copy(update={"seq": 1})]
    w.add(2)
    tape = merge(w.inputs(), w.blobs).tape
    excluded = {e.hotkey: e for e in tape.excluded}
    assert list(excluded) == [HOTKEYS[0]]
    assert excluded[HOTKEYS[0]].reason == "near_duplicate"
    assert {i.hotkey for i in tape.included} == {HOTKEYS[1], HOTKEYS[2]}
    assert verify_tape(tape, w.blobs).identical


def test_independent_updates_are_far_below_the_threshold() -> None:
    w = World()
    a, b = (w.blobs.get(w.add(i).update_sha256) for i in (0, 1))
    shapes = param_shapes(w.manifest.model)
    assert abs(exact_cosine(a, b, shapes)) < 0.2 < NEAR_DUPLICATE_COSINE
    assert exact_cosine(a, a, shapes) > 0.999999
    assert sketch(a) == sketch(bytes(a))  # a pure function of the bytes
    assert hashlib.sha256(a).hexdigest() != hashlib.sha256(b).hexdigest()
