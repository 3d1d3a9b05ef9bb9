from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.beacon.chain import QUICKNET, ChainInfo
from hypertrain.beacon.local import local_chain
from hypertrain.beacon.timing import (
    first_round_after,
    first_round_after_time,
    round_at,
    seconds_until_round,
    time_of_round,
)

LOCAL = local_chain(b"\x00" * 31 + b"\x07", period_s=1, genesis_time=1_700_000_000, beacon_id="t")
CHAINS = st.sampled_from([QUICKNET, LOCAL])
ROUNDS = st.integers(min_value=1, max_value=10**9)
TIMES = st.floats(min_value=0, max_value=2**40, allow_nan=False)


def test_recorded_beacon_times(vectors: dict[str, Any]) -> None:
    for b in vectors["beacons"]:
        assert time_of_round(QUICKNET, b["round"]) == b["time_unix"]
        assert round_at(QUICKNET, b["time_unix"]) == b["round"]
        assert round_at(QUICKNET, b["time_unix"] - 0.001) == b["round"] - 1


def test_before_genesis_is_round_zero() -> None:
    assert round_at(QUICKNET, QUICKNET.genesis_time - 1) == 0
    assert round_at(QUICKNET, 0) == 0
    assert round_at(QUICKNET, QUICKNET.genesis_time) == 1


def test_bad_inputs() -> None:
    with pytest.raises(ValueError):
        time_of_round(QUICKNET, 0)
    with pytest.raises(ValueError):
        first_round_after(-1)
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            round_at(QUICKNET, bad)


@given(CHAINS, ROUNDS)
def test_round_of_its_own_time(chain: ChainInfo, r: int) -> None:
    assert round_at(chain, time_of_round(chain, r)) == r


@given(CHAINS, TIMES)
def test_round_at_brackets_time(chain: ChainInfo, t: float) -> None:
    r = round_at(chain, t)
    if r == 0:
        assert t < chain.genesis_time
        return
    assert time_of_round(chain, r) <= t < time_of_round(chain, r + 1)


@given(CHAINS, TIMES, TIMES)
def test_round_at_is_monotone(chain: ChainInfo, a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    assert round_at(chain, lo) <= round_at(chain, hi)


@given(st.integers(min_value=0, max_value=10**12))
def test_first_round_after_is_strictly_later(deadline: int) -> None:
    assert first_round_after(deadline) > deadline
    assert first_round_after(deadline) == deadline + 1


@given(CHAINS, TIMES)
def test_first_round_after_time_cannot_exist_at_that_time(chain: ChainInfo, t: float) -> None:
    r = first_round_after_time(chain, t)
    assert time_of_round(chain, r) > t
    assert r == round_at(chain, t) + 1
    assert seconds_until_round(chain, r, t) > 0
