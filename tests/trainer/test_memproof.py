"""The memory proof's workload: its geometry, its frozen bytes, and what skipping costs."""

from __future__ import annotations

import pytest
import torch

from hypertrain.protocol.memproof import (
    LANES,
    MAX_ROWS,
    MIN_CLAIM_BYTES,
    QUERIES,
    check_sample,
    device_seed,
    table_shape,
)
from hypertrain.trainer.memproof import build_table, check_answers, device_answers, walk

CPU = torch.device("cpu")


def test_the_table_is_the_claim_rounded_down_to_rows() -> None:
    assert table_shape(MIN_CLAIM_BYTES) == type(table_shape(MIN_CLAIM_BYTES))(128, LANES)
    big = table_shape(200 << 20)
    assert big.rows <= MAX_ROWS and big.lanes % LANES == 0
    assert (200 << 20) - big.lanes * 8 < big.proven_bytes <= 200 << 20
    for bad in (MIN_CLAIM_BYTES - 1, (1 << 40) + 1):
        with pytest.raises(ValueError, match="a memory claim is"):
            table_shape(bad)


def test_answers_are_frozen_and_a_worker_recomputes_any_subset() -> None:
    answers = device_answers(7, 0, MIN_CLAIM_BYTES, CPU)
    assert len(answers) == QUERIES and len(set(answers)) == QUERIES
    assert answers[0] == "c52ea212d50bd2ff4f0c16860e3d733a"  # a byte change must be deliberate
    assert check_answers(7, 0, MIN_CLAIM_BYTES, [3, 1], CPU) == [answers[3], answers[1]]
    assert device_answers(7, 1, MIN_CLAIM_BYTES, CPU) != answers  # each device its own table
    assert device_seed(7, 0) != device_seed(7, 1)


def test_skipping_a_thousandth_of_the_table_changes_almost_every_answer() -> None:
    """Each answer reads 64 walks × 64 entries: with 0.1 % of entries missing, an answer
    survives with probability 0.999^4096 ≈ 1.7 % (docs/mechanism.md, "Memory proof")."""
    own = device_seed(11, 0)
    flat = build_table(own, MIN_CLAIM_BYTES, CPU)
    honest = walk(flat, own, list(range(QUERIES)))
    holes = torch.arange(0, flat.numel(), 1000)  # every thousandth entry not held
    flat[holes] = 0
    partial = walk(flat, own, list(range(QUERIES)))
    assert sum(a != b for a, b in zip(honest, partial, strict=True)) >= QUERIES - 2


def test_the_sample_is_keyed_by_the_beacon_and_the_hotkey() -> None:
    one = check_sample("ab" * 32, "5Fhk", 8)
    assert len({d for d, _ in one}) == 2 and len(one) == 8
    assert one == check_sample("ab" * 32, "5Fhk", 8)
    assert one != check_sample("cd" * 32, "5Fhk", 8)
    assert {d for d, _ in check_sample("ab" * 32, "5Fhk", 1)} == {0}
