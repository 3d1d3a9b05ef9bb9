"""The one traffic count: the data-parallel baseline, our bytes, and the ratio in words."""

from __future__ import annotations

import pytest

from hypertrain.protocol.traffic import (
    AllIn,
    RoundBytes,
    TrafficRound,
    data_parallel_bytes,
    ddp_bytes_per_device,
    ddp_bytes_total,
    factor_words,
    ratio,
    ratio_words,
    summarize,
    uploads_per_audit,
)


def test_ring_cost_is_2_n_minus_1_over_n_model_bytes_per_step_each_way() -> None:
    # 8 devices, 1000 bf16 gradients (2000 bytes), 10 steps: 2 * 7/8 * 2000 * 10 per device
    assert ddp_bytes_per_device(1000, 8, 10) == 35_000
    assert ddp_bytes_total(1000, 8, 10) == 280_000
    assert data_parallel_bytes(1000, 8, 10) == 560_000  # what is sent is also received
    assert data_parallel_bytes(1000, 1, 10) == 0  # one device talks to nobody


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="bad traffic"):
        data_parallel_bytes(10, 0, 1)
    with pytest.raises(ValueError, match="negative"):
        RoundBytes(updates=-1)


@pytest.mark.parametrize(
    ("ddp", "ours", "words"),
    [
        (1000, 100, "10× less than data-parallel"),
        (1_750_000, 1000, "1,750× less than data-parallel"),
        (1250, 1000, "1.2× less than data-parallel"),
        (880, 1000, "1.1× more than data-parallel"),  # never "0.88x fewer"
        (100, 4000, "40× more than data-parallel"),
        (1000, 1001, "as much as data-parallel"),
        (0, 10, "data-parallel would move nothing (one island)"),
        (10, 0, "no bytes moved yet"),
    ],
)
def test_ratio_words_say_less_or_more(ddp: int, ours: int, words: str) -> None:
    assert ratio_words(ddp, ours) == words
    assert "fewer" not in words and "0." not in words


def test_a_divided_ratio_reads_the_same() -> None:
    assert factor_words(0.88) == "1.1× more than data-parallel"
    assert factor_words(8490.09) == "8,490× less than data-parallel"
    with pytest.raises(ValueError, match="positive"):
        factor_words(0)


def test_ratio_is_theirs_over_ours() -> None:
    assert ratio(1000, 10) == 100.0
    assert ratio(1000, 0) is None


def test_round_bytes_add_up_by_kind() -> None:
    a = RoundBytes(commits=1, updates=10, broadcasts=100, checkpoints=1000, joins=10_000)
    b = RoundBytes(updates=5)
    assert (a + b).total() == 11_116 and (a + b).parts()["updates"] == 15
    assert set(a.parts()) == {"commits", "updates", "broadcasts", "checkpoints", "joins"}


def test_summary_splits_steady_state_from_probation() -> None:
    rounds = [
        TrafficRound(0, RoundBytes(updates=100, joins=900), 1000, probation=True),
        TrafficRound(1, RoundBytes(updates=100, broadcasts=100), 10_000, probation=False),
        TrafficRound(2, RoundBytes(updates=100, broadcasts=100), 10_000, probation=False),
    ]
    s = summarize(rounds)
    assert (s.all.rounds, s.steady.rounds, s.probation.rounds) == (3, 2, 1)
    assert s.steady.ours_bytes == 400 and s.steady.data_parallel == 20_000
    assert s.steady.words == "50× less than data-parallel"
    assert s.probation.words == "as much as data-parallel"
    assert s.all.ratio == 21_000 / 1400
    assert summarize([]).steady.words == "no such round yet"


def test_all_in_counts_the_warm_start_on_both_sides_and_so_is_capped_by_it() -> None:
    rounds = [TrafficRound(r, RoundBytes(updates=10), 10_000, probation=False) for r in range(3)]
    rounds_only = summarize(rounds).all
    assert rounds_only.words == "1,000× less than data-parallel"
    # a warm start of 1 % of all steps: 3 rounds of 10,000 are 99 % of the baseline
    warm = AllIn(rounds_only, warm_start=303)
    assert (warm.ours_bytes, warm.data_parallel) == (333, 30_303)
    assert warm.ratio == 30_303 / 333 and warm.ratio < 100  # the cap: 1 / 1 %
    assert warm.words == "91× less than data-parallel"
    assert AllIn(rounds_only).ratio == rounds_only.ratio  # no warm start: the rounds
    assert AllIn(summarize([]).all, warm_start=303).words == "no such round yet"
    with pytest.raises(ValueError, match="negative"):
        AllIn(rounds_only, warm_start=-1)


def test_uploads_per_audit_by_layout_and_policy() -> None:
    # one segment (J = H): nothing to upload but, under carry, the previous final state
    assert uploads_per_audit(1, 2, carried=False) == 0.0
    assert uploads_per_audit(1, 2, carried=True) == 1.0
    # an auditor stored the carried state of the islands the rate matched the round before
    assert uploads_per_audit(1, 2, carried=True, audit_rate=0.1) == pytest.approx(0.9)
    assert uploads_per_audit(1, 2, carried=True, audit_rate=1.0) == 0.0
    with pytest.raises(ValueError):
        uploads_per_audit(1, 2, carried=True, audit_rate=1.5)
    # ten segments, two drawn plus the final one: segment 0 in 2 of 9 draws (docs/traffic.md)
    assert uploads_per_audit(10, 2, carried=False) == pytest.approx(1 + 2 - 2 / 9)
    assert uploads_per_audit(10, 2, carried=True) == pytest.approx(2 + 2 - 2 / 9)
    # three segments, two drawn: every segment is replayed, segment 0 never uploaded
    assert uploads_per_audit(3, 2, carried=False) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        uploads_per_audit(0, 1, carried=False)
