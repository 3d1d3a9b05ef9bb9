"""The merge: determinism, token weights, clipping, every screen, streaming memory."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import torch

from hypertrain.aggregator.errors import AggregatorError
from hypertrain.aggregator.merge import max_tokens, merge
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.codec import decode_int8, encode_int8, parse_header
from tests.aggregator.helpers import HOTKEYS, World, delta

ROOT = Path(__file__).parents[2]


def _reasons(world: World) -> dict[str, str]:
    tape = merge(world.inputs(), world.blobs).tape
    return {e.hotkey: e.reason for e in tape.excluded}


def test_merge_is_bitwise_reproducible_across_processes() -> None:
    script = (
        "from tests.aggregator.helpers import World\n"
        "from hypertrain.aggregator.merge import merge\n"
        "w = World()\n"
        "for i in range(3): w.add(i, tokens=100 + 50 * i)\n"
        "r = merge(w.inputs(), w.blobs)\n"
        "print(r.tape.sha256(), r.tape.new_model_sha256, r.tape.new_outer_state_sha256)\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    w = World()
    for i in range(3):
        w.add(i, tokens=100 + 50 * i)
    r = merge(w.inputs(), w.blobs)
    assert other.stdout.split() == [
        r.tape.sha256(),
        r.tape.new_model_sha256,
        r.tape.new_outer_state_sha256,
    ]


def test_candidate_order_does_not_matter() -> None:
    w = World()
    for i in range(4):
        w.add(i)
    first = merge(w.inputs(), w.blobs)
    w.candidates.reverse()
    second = merge(w.inputs(), w.blobs)
    assert first.model_blob == second.model_blob and first.tape == second.tape


def test_weights_follow_tokens_and_outer_step_matches_hand_computation() -> None:
    w = World(lr=0.5, momentum=0.8)
    w.add(0, tokens=60)
    w.add(1, tokens=180)
    result = merge(w.inputs(), w.blobs)
    assert [i.weight for i in result.tape.included] == [0.25, 0.75]
    assert all(i.clip_factor == 1.0 for i in result.tape.included)
    start = decode_model_blob(w.blobs.get(w.start_sha), w.manifest.model)
    u = [decode_int8(w.blobs.get(c.update_sha256)) for c in w.candidates]
    new = decode_model_blob(result.model_blob, w.manifest.model)
    for name in start:
        d = u[0][name].double() * 0.25 + u[1][name].double() * 0.75
        # zero momentum: m' = d, theta' = theta - lr * (d + mu * d)
        expected = start[name].double() - 0.5 * (d + 0.8 * d)
        torch.testing.assert_close(new[name].double(), expected, rtol=0, atol=1e-6)


def test_large_update_is_clipped_to_the_median_threshold() -> None:
    w = World(clip_to_median_factor=1.5, reject_norm_factor=10.0)
    for i in range(3):
        w.add(i, scale=1e-3)
    w.add(3, scale=5e-3)  # ~5x the others: clipped, not rejected
    tape = merge(w.inputs(), w.blobs).tape
    by_key = {i.hotkey: i for i in tape.included}
    big = by_key[HOTKEYS[3]]
    assert big.clip_factor < 1.0
    assert big.norm * big.clip_factor == pytest.approx(tape.clip_threshold, rel=1e-12)
    assert tape.clip_threshold == pytest.approx(1.5 * tape.median_norm)
    assert all(by_key[HOTKEYS[i]].clip_factor == 1.0 for i in range(3))


def test_norm_outliers_and_zero_updates_are_rejected_with_reasons() -> None:
    w = World(reject_norm_factor=4.0)
    for i in range(3):
        w.add(i, scale=1e-3)
    w.add(3, scale=1.0)  # 1000x the median
    w.add(4, scale=1e-6)  # 1000x below it
    zeros = {n: torch.zeros_like(t) for n, t in delta(w.manifest, 0).items()}
    w.add(5, data=encode_int8(zeros, w.manifest.compression.block_size))
    reasons = _reasons(w)
    assert reasons == {HOTKEYS[3]: "norm_outlier", HOTKEYS[4]: "norm_outlier",
                       HOTKEYS[5]: "zero_norm"}  # fmt: skip


def test_malformed_updates_are_screened(monkeypatch: pytest.MonkeyPatch) -> None:
    w = World()
    w.add(0)
    w.add(1)
    good = w.blobs.get(w.candidates[0].update_sha256)
    block = w.manifest.compression.block_size
    wrong_shape = {n: t[..., :1] for n, t in delta(w.manifest, 2).items()}
    w.add(2, data=encode_int8(wrong_shape, block))
    w.add(3, data=good[:-1])  # truncated: wrong size for its header
    # NaN in the first scale of the first tensor body
    pos = parse_header(good)[2]
    nan = good[:pos] + bytes.fromhex("0000c07f") + good[pos + 4 :]
    w.add(4, data=nan)
    w.add(5, data=b"JUNK" + good[4:])
    w.add(6, size=123)  # commit announces another size
    w.add(7, tokens=max_tokens(w.manifest) + 1)
    w.add(8, tokens=0)
    reasons = _reasons(w)
    assert reasons == {
        HOTKEYS[2]: "wrong_shape", HOTKEYS[3]: "wrong_size", HOTKEYS[4]: "non_finite",
        HOTKEYS[5]: "malformed", HOTKEYS[6]: "wrong_size", HOTKEYS[7]: "tokens_out_of_range",
        HOTKEYS[8]: "tokens_out_of_range",
    }  # fmt: skip


def test_missing_and_tampered_blobs_are_excluded_not_fatal() -> None:
    w = World()
    w.add(0)
    w.add(1)
    w.add(2)
    del w.blobs.data[w.candidates[1].update_sha256]
    sha = w.candidates[2].update_sha256
    w.blobs.data[sha] = w.blobs.data[sha][:-1] + b"\x01"
    tape = merge(w.inputs(), w.blobs).tape
    assert {e.hotkey: e.reason for e in tape.excluded} == {
        HOTKEYS[1]: "missing_blob",
        HOTKEYS[2]: "hash_mismatch",
    }
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert tape.included[0].weight == 1.0


def test_nothing_included_keeps_the_model() -> None:
    w = World()
    w.add(0, tokens=0)
    result = merge(w.inputs(), w.blobs)
    assert result.tape.included == [] and result.tape.new_model_sha256 == w.start_sha


def test_duplicate_hotkeys_and_bad_start_model_are_refused() -> None:
    w = World()
    w.add(0)
    w.candidates.append(w.candidates[0])
    with pytest.raises(AggregatorError, match="same hotkey"):
        merge(w.inputs(), w.blobs)
    w.candidates.pop()
    w.blobs.data[w.start_sha] = b"garbage"
    with pytest.raises(ValueError, match="hash"):
        merge(w.inputs(), w.blobs)


def _traced_peak(count: int) -> tuple[int, int]:
    w = World()
    for i in range(count):
        w.add(i)
    blob = len(w.blobs.get(w.candidates[0].update_sha256))
    tracemalloc.start()
    try:
        merge(w.inputs(), w.blobs)
        return tracemalloc.get_traced_memory()[1], blob
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_number_of_updates() -> None:
    small, blob = _traced_peak(2)
    large, _ = _traced_peak(16)
    # the Gram matrix holds the encoded updates (14 more blobs), one chunk of blocks of
    # each and its O(M^2) partial sums; 14 more decoded updates (4 bytes a value, four
    # times a blob each) would add at least 14 * 4 blobs
    assert large - small < 14 * blob * 2.5


def test_update_hash_is_the_relay_address() -> None:
    w = World()
    c = w.add(0)
    assert hashlib.sha256(w.blobs.get(c.update_sha256)).hexdigest() == c.update_sha256
