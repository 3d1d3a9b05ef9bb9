"""Audit selection is a pure function of public data, with the promised shape."""

from __future__ import annotations

import pytest

from hypertrain.challenge.rounds.selection import (
    assignment_key,
    catch_probability,
    pick_segments,
    rate_threshold,
    select_audits,
    selection_seed,
)

HOTKEYS = [f"5hotkey{i:02d}" for i in range(200)]


def _select(rate: float, probation: bool = False, randomness: str = "ab" * 32) -> list[str]:
    audits = select_audits(
        run_id="r",
        round_index=3,
        beacon_round=99,
        randomness_hex=randomness,
        committed=dict.fromkeys(HOTKEYS, probation),
        rate=rate,
        segments_per_audit=3,
        num_segments=8,
    )
    return [a.hotkey for a in audits]


def test_reproducible_and_randomness_dependent() -> None:
    assert _select(0.3) == _select(0.3)
    assert _select(0.3) != _select(0.3, randomness="cd" * 32)
    assert 30 <= len(_select(0.3)) <= 90


def test_rate_bounds_and_probation() -> None:
    assert _select(0.0) == []
    assert _select(1.0) == sorted(HOTKEYS)
    assert _select(0.0, probation=True) == sorted(HOTKEYS)
    assert rate_threshold(1.0) == 1 << 64
    with pytest.raises(ValueError):
        rate_threshold(1.5)


def test_segments_distinct_sorted_final_included() -> None:
    seed = selection_seed("r", 0, 5, "00" * 32)
    seen = set()
    for hotkey in HOTKEYS[:50]:
        segs = pick_segments(seed, hotkey, 8, 3)
        assert len(segs) == 4 and segs[-1] == 7 and list(segs) == sorted(set(segs))
        seen.update(segs[:-1])
    assert seen == set(range(7))  # every non-final segment gets picked by someone
    assert pick_segments(seed, "h", 3, 5) == (0, 1, 2)
    assert pick_segments(seed, "h", 1, 3) == (0,)


def test_catch_probability_formula() -> None:
    assert catch_probability(
        rate=0.1, segments_per_audit=3, num_segments=8, faked=1, final_faked=True
    ) == pytest.approx(0.1)
    # 1 faked non-final segment of 7, 3 drawn: caught with chance 3/7 when audited
    assert catch_probability(
        rate=1.0, segments_per_audit=3, num_segments=8, faked=1, final_faked=False
    ) == pytest.approx(3 / 7)
    assert catch_probability(
        rate=1.0, segments_per_audit=3, num_segments=8, faked=5, final_faked=False
    ) == pytest.approx(1.0)


def test_assignment_key_is_stable_hex() -> None:
    key = assignment_key("r", 0, "ab" * 32)
    assert key == assignment_key("r", 0, "ab" * 32) and len(key) == 64
    assert key != assignment_key("r", 1, "ab" * 32)
