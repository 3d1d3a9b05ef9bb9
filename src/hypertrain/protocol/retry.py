"""The one retry loop of the HTTP transports: bounded attempts with exponential backoff.

Retries belong in transport (beacon client, relay client), never in numerics. A caller
says which failures are worth another attempt (``retry_on`` for exceptions,
``retry_if`` for answers such as an HTTP 503); the last attempt's exception or answer
is the caller's to handle. ``sleep`` is injectable so tests run without waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """``attempts`` tries in all; the wait before try ``n + 1`` is ``first_delay_s * 2**(n-1)``."""

    attempts: int = 3
    first_delay_s: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_delay_s < 0:
            raise ValueError("attempts must be >= 1 and first_delay_s >= 0")

    def delay_s(self, failed: int) -> float:
        """The wait after ``failed`` (>= 1) failed tries."""
        return float(self.first_delay_s * 2 ** (failed - 1))


def retry(
    call: Callable[[], T],
    policy: Backoff,
    *,
    retry_on: Callable[[Exception], bool] = lambda exc: False,
    retry_if: Callable[[T], bool] = lambda value: False,
    sleep: Callable[[float], None] = time.sleep,
    what: str = "request",
) -> T:
    """Call until it succeeds, fails for good, or ``policy.attempts`` are spent."""
    for attempt in range(1, policy.attempts + 1):
        last = attempt == policy.attempts
        try:
            value = call()
        except Exception as exc:
            if last or not retry_on(exc):
                raise
            log.warning("%s failed (%s); retrying in %.2f s", what, exc, policy.delay_s(attempt))
        else:
            if last or not retry_if(value):
                return value
            log.warning("%s answered %r; retrying in %.2f s", what, value, policy.delay_s(attempt))
        sleep(policy.delay_s(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")
