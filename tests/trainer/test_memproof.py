"""The memory proof's workload: its geometry, its frozen bytes, and what skipping costs."""

from __future__ import annotations

import pytest
import torch

from hypertrain.protocol.memproof import (
    LADDER_SHIFTS,
    LANES,
    MAX_ROWS,
    MIN_CLAIM_BYTES,
    QUERIES,
    QUERIES_CHECKED,
    check_sample,
    device_seed,
    prefix_rows,
    table_shape,
)
from hypertrain.trainer.memproof import (
    CheckBudgetError,
    build_table,
    check_answers,
    check_device,
    device_answers,
    walk,
)

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
    # a byte change must be deliberate (docs/protocol.md): a rung, and a whole-table answer
    assert answers[0] == "f67d613466ed02bd65c87a6215b37f3e"
    assert answers[4] == "211472a09f20c527e2463c2085873b4d"
    assert check_answers(7, 0, MIN_CLAIM_BYTES, [3, 1], CPU) == [answers[3], answers[1]]
    assert device_answers(7, 1, MIN_CLAIM_BYTES, CPU) != answers  # each device its own table
    assert device_seed(7, 0) != device_seed(7, 1)


def test_skipping_a_thousandth_of_the_table_changes_almost_every_answer() -> None:
    """Each answer reads 64 walks × 64 entries: with 0.1 % of entries missing, an answer
    survives with probability 0.999^4096 ≈ 1.7 % (docs/mechanism.md, "Memory proof")."""
    own = device_seed(11, 0)
    flat = build_table(own, MIN_CLAIM_BYTES, CPU)
    shape = table_shape(MIN_CLAIM_BYTES)
    honest = walk(flat, own, list(range(QUERIES)), shape)
    holes = torch.arange(0, flat.numel(), 1000)  # every thousandth entry not held
    flat[holes] = 0
    partial = walk(flat, own, list(range(QUERIES)), shape)
    assert sum(a != b for a, b in zip(honest, partial, strict=True)) >= QUERIES - 2


def test_the_sample_is_keyed_by_the_beacon_and_the_hotkey() -> None:
    one = check_sample("ab" * 32, "5Fhk", 8)
    assert len({d for d, _ in one}) == 2 and len(one) == 2 * QUERIES_CHECKED
    rungs = range(len(LADDER_SHIFTS))
    for device in {d for d, _ in one}:  # every rung, then whole-table answers
        queries = [q for d, q in one if d == device]
        assert queries[: len(rungs)] == list(rungs) and min(queries[len(rungs) :]) >= len(rungs)
    assert one == check_sample("ab" * 32, "5Fhk", 8)
    assert one != check_sample("cd" * 32, "5Fhk", 8)
    assert {d for d, _ in check_sample("ab" * 32, "5Fhk", 1)} == {0}


def test_the_ladder_reads_growing_prefixes_and_the_rest_the_whole_table() -> None:
    shape = table_shape(16 << 30)
    rungs = [prefix_rows(shape, q) for q in range(len(LADDER_SHIFTS))]
    assert rungs == sorted(rungs) and rungs[0] == shape.rows >> 8 and rungs[-1] < shape.rows
    assert {prefix_rows(shape, q) for q in range(len(LADDER_SHIFTS), QUERIES)} == {shape.rows}
    small = table_shape(MIN_CLAIM_BYTES)
    assert prefix_rows(small, 0) == 2  # never row 0 alone (a function of the seed)


def test_a_check_stops_at_the_first_wrong_rung_and_counts_what_it_built() -> None:
    """An island that built nothing (zeros) costs the worker the smallest rung: it builds
    one 256th of the table before it refuses, whatever the claim."""
    claim = 256 << 20
    shape = table_shape(claim)
    sample = dict.fromkeys((0, 1, 2, 3, 5, 9, 12, 15), "00" * 16)
    zeros = check_device(3, 0, claim, sample, CPU, max_entries=shape.entries)
    assert zeros.wrong_query == 0 and list(zeros.answers) == [0]
    assert zeros.entries_built == prefix_rows(shape, 0) * shape.lanes == shape.entries // 256
    honest = dict(zip(range(QUERIES), device_answers(3, 0, claim, CPU), strict=True))
    passed = check_device(3, 0, claim, {q: honest[q] for q in sample}, CPU, shape.entries)
    assert passed.wrong_query is None and passed.entries_built == shape.entries
    rung_only = {q: honest[q] if q < 2 else "00" * 16 for q in sample}
    stopped = check_device(3, 0, claim, rung_only, CPU, shape.entries)  # two rungs right
    assert stopped.wrong_query == 2
    assert stopped.entries_built == prefix_rows(shape, 2) * shape.lanes  # 4 × the last right
    with pytest.raises(CheckBudgetError):  # refused before anything is built
        check_device(3, 0, claim, sample, CPU, max_entries=shape.entries - 1)
