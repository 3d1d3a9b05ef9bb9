"""The beacon-round clock the relay checks envelope expiry against.

drand rounds are a pure function of wall time: round ``r`` is published at
``genesis + (r - 1) * period``. The relay needs only "which round is it now",
so it computes that from the chain's public parameters instead of fetching beacons.
The defaults are drand quicknet's; a devnet passes its local beacon's parameters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

QUICKNET_GENESIS_UNIX: Final = 1692803367
QUICKNET_PERIOD_S: Final = 3


@dataclass(frozen=True, slots=True)
class BeaconClock:
    """Maps wall time to the current beacon round."""

    genesis_unix: int = QUICKNET_GENESIS_UNIX
    period_s: int = QUICKNET_PERIOD_S
    now: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        if self.period_s <= 0:
            raise ValueError(f"beacon period must be positive, got {self.period_s}")

    def current_round(self) -> int:
        """The latest round that has been published (0 before genesis)."""
        return self.round_at(self.now())

    def round_at(self, unix: float) -> int:
        """The latest round published at wall time ``unix`` (0 before genesis)."""
        elapsed = unix - self.genesis_unix
        if elapsed < 0:
            return 0
        return int(elapsed // self.period_s) + 1
