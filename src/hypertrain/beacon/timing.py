"""Beacon-round arithmetic: the only clock the protocol trusts is the round number.

Round ``r >= 1`` is published at ``genesis_time + period_s * (r - 1)``; round 0 means
"before genesis". A round whose time is after a moment ``t`` cannot have existed at
``t`` (nobody but the drand network can sign it), which is why an audit is drawn from
a round strictly after the commit deadline round. All functions are pure.
"""

from __future__ import annotations

import math

from hypertrain.beacon.chain import ChainInfo


def round_at(chain: ChainInfo, unix_time: float) -> int:
    """The latest round published at or before ``unix_time`` (0 before genesis)."""
    if math.isnan(unix_time) or math.isinf(unix_time):
        raise ValueError(f"time {unix_time} is not a finite number")
    if unix_time < chain.genesis_time:
        return 0
    return int((unix_time - chain.genesis_time) // chain.period_s) + 1


def time_of_round(chain: ChainInfo, round_number: int) -> int:
    """The unix time at which round ``round_number`` (>= 1) is published."""
    if round_number < 1:
        raise ValueError(f"round {round_number} does not exist: rounds start at 1")
    return chain.genesis_time + chain.period_s * (round_number - 1)


def first_round_after(deadline_round: int) -> int:
    """The first round strictly later than ``deadline_round``: it cannot exist before it."""
    if deadline_round < 0:
        raise ValueError(f"deadline round {deadline_round} is negative")
    return deadline_round + 1


def first_round_after_time(chain: ChainInfo, unix_time: float) -> int:
    """The first round published strictly after ``unix_time``."""
    return first_round_after(round_at(chain, unix_time))


def seconds_until_round(chain: ChainInfo, round_number: int, now: float) -> float:
    """How long from ``now`` until ``round_number`` is due (0 if it is already due)."""
    return max(0.0, time_of_round(chain, round_number) - now)
