"""Exact integer splits: largest remainder and the vesting schedule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.ledger.split import largest_remainder, vested_prefix, vesting_schedule

tokens_maps = st.dictionaries(
    st.text(alphabet="abcdefgh", min_size=1, max_size=3), st.integers(0, 10**12), max_size=40
)


@given(pool=st.integers(0, 2**53 - 1), tokens=tokens_maps)
def test_largest_remainder_sums_exactly(pool: int, tokens: dict[str, int]) -> None:
    parts = largest_remainder(pool, tokens)
    assert set(parts) == set(tokens)
    total = sum(tokens.values())
    assert sum(parts.values()) == (pool if total else 0)
    for hotkey, part in parts.items():
        exact_num = pool * tokens[hotkey]
        if total:  # each part is its quota rounded down or up, never further
            assert exact_num // total <= part <= exact_num // total + 1


def test_largest_remainder_known_values_and_ties() -> None:
    assert largest_remainder(1000, {"a": 3, "b": 1}) == {"a": 750, "b": 250}
    # 10 over three equal shares: one unit left, the first hotkey in string order gets it.
    assert largest_remainder(10, {"c": 1, "b": 1, "a": 1}) == {"a": 4, "b": 3, "c": 3}
    # Largest remainder wins before the tie-break: 7*2/3 = 4.67 beats 7*1/3 = 2.33.
    assert largest_remainder(7, {"a": 1, "b": 2}) == {"a": 2, "b": 5}
    assert largest_remainder(5, {"a": 0, "b": 0}) == {"a": 0, "b": 0}
    assert largest_remainder(5, {}) == {}


def test_largest_remainder_refuses_negative() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        largest_remainder(10, {"a": -1})
    with pytest.raises(ValueError, match="non-negative"):
        largest_remainder(-1, {"a": 1})


@given(amount=st.integers(0, 2**53 - 1), vesting=st.integers(1, 64))
def test_vesting_schedule_sums_and_prefixes(amount: int, vesting: int) -> None:
    tranches = vesting_schedule(amount, vesting)
    assert len(tranches) == vesting and sum(tranches) == amount
    assert max(tranches) - min(tranches) <= 1
    for k in range(-1, vesting + 2):
        assert vested_prefix(amount, vesting, k) == sum(tranches[: max(0, k)])


def test_vesting_schedule_known_values() -> None:
    assert vesting_schedule(10, 3) == [4, 3, 3]
    assert vesting_schedule(2, 4) == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        vesting_schedule(5, 0)
