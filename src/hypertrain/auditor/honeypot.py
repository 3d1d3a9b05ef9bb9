"""Deliberately dishonest training for the operator's adversarial island.

Each strategy breaks the round in a way only byte comparison can reveal, so a devnet
or test can prove the audits work:

* ``wrong-samples``: train on other (valid, root-verified) samples than assigned.
* ``skip-steps``: train ``J - 1`` steps per segment instead of ``J``.
* ``bad-update``: train honestly but upload an update that is not the compressed
  delta of the final state (the delta is scaled before encoding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from torch import Tensor

Strategy = Literal["wrong-samples", "skip-steps", "bad-update"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("wrong-samples", "skip-steps", "bad-update")


def check_strategy(name: str | None) -> Strategy | None:
    if name is None or name == "":
        return None
    if name not in STRATEGIES:
        raise ValueError(f"unknown honeypot strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return name


def sample_ids(strategy: Strategy | None, ids: Sequence[int], sample_count: int) -> list[int]:
    """The ids the island actually trains on."""
    if strategy != "wrong-samples":
        return list(ids)
    return [(i + 1) % sample_count for i in ids]


def steps_per_segment(strategy: Strategy | None, interval: int) -> int:
    return max(0, interval - 1) if strategy == "skip-steps" else interval


def tamper_start(strategy: Strategy | None, start: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The start parameters the update is computed against (skewed for ``bad-update``)."""
    if strategy != "bad-update":
        return dict(start)
    return {name: t * 1.01 for name, t in start.items()}
