"""A drand HTTP client that trusts nothing it has not verified.

:class:`BeaconClient` asks a list of endpoints (drand relays, or the local devnet
beacon) for ``/{chain_hash}/info``, ``/{chain_hash}/public/latest`` and
``/{chain_hash}/public/{round}``. On first contact with an endpoint it checks that the
endpoint serves the pinned chain. Every beacon is verified against the pinned key
before use; an endpoint that is dead, slow, answers garbage, the wrong round, a
forged signature or a round from the future is logged with the reason and the next
endpoint is tried; whole passes are retried with exponential backoff. Verified
rounds go to a SQLite cache so each is fetched and verified once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeVar

import httpx

from hypertrain.beacon.cache import BeaconCache
from hypertrain.beacon.chain import ChainInfo, check_same_chain, parse_chain_info
from hypertrain.beacon.errors import (
    BeaconError,
    BeaconTimeoutError,
    BeaconUnavailableError,
    EndpointError,
    FutureRoundError,
    MalformedError,
    RoundNotAvailableError,
)
from hypertrain.beacon.timing import round_at, seconds_until_round, time_of_round
from hypertrain.beacon.verify import Beacon, beacon_from_json
from hypertrain.protocol.retry import Backoff, retry

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_RESPONSE_BYTES: Final = 64 * 1024
NOT_YET_STATUSES: Final = frozenset({404, 425})


class BeaconClient:
    """Verified drand beacons from a list of endpoints; see the module docstring."""

    def __init__(
        self,
        endpoints: Sequence[str],
        chain: ChainInfo,
        cache_path: Path | None = None,
        *,
        timeout_s: float = 5.0,
        retries: int = 2,
        backoff_s: float = 0.25,
        max_clock_skew_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not endpoints:
            raise ValueError("a beacon client needs at least one endpoint")
        if timeout_s <= 0 or retries < 0 or backoff_s < 0 or max_clock_skew_s < 0:
            raise ValueError("timeout_s must be positive; retries, backoff_s and skew >= 0")
        self.endpoints = tuple(e.rstrip("/") for e in endpoints)
        self.chain = chain
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_clock_skew_s = max_clock_skew_s
        self._clock = clock
        self._sleep = sleep
        self._cache = BeaconCache(cache_path)
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False)
        self._checked: set[str] = set()
        self._lock = threading.Lock()

    # -- public API -------------------------------------------------------------------

    def due_round(self) -> int:
        """The round the chain's schedule says is published now (fetched or not)."""
        return round_at(self.chain, self._clock())

    def info(self) -> ChainInfo:
        """The chain info from the first endpoint that serves the pinned chain."""
        return self._over_endpoints("info", self._check_endpoint)

    def latest(self) -> Beacon:
        """The newest verified beacon (never older than one this client already verified)."""
        fetched = self._over_endpoints("latest", lambda e: self._fetch(e, "latest", None))
        known = self._cache.latest(self.chain.chain_hash)
        return known if known is not None and known.round > fetched.round else fetched

    def get(self, round_number: int) -> Beacon:
        """The verified beacon of one round, from the cache or the endpoints."""
        if isinstance(round_number, bool) or not isinstance(round_number, int) or round_number < 1:
            raise MalformedError(f"round {round_number!r} is not a positive integer")
        cached = self._cache.get(self.chain.chain_hash, round_number)
        if cached is not None:
            return cached
        self._check_not_future(round_number)
        return self._over_endpoints(
            f"round {round_number}", lambda e: self._fetch(e, str(round_number), round_number)
        )

    def wait_for(
        self, round_number: int, *, timeout_s: float | None = None, poll_s: float | None = None
    ) -> Beacon:
        """Block until ``round_number`` exists, then return it verified.

        Sleeps until the round is due by the local clock, then polls every ``poll_s``
        (default a quarter period). ``timeout_s`` defaults to the round's due time plus
        ten periods and 30 s; past it, :class:`BeaconTimeoutError`.
        """
        now = self._clock()
        if timeout_s is None:
            due = time_of_round(self.chain, max(round_number, 1))
            deadline = max(now, due) + 10 * self.chain.period_s + 30.0
        else:
            deadline = now + timeout_s
        poll = poll_s if poll_s is not None else min(1.0, self.chain.period_s / 4)
        while True:
            wait = seconds_until_round(self.chain, max(round_number, 1), self._clock())
            if wait > 0:
                self._sleep(min(wait, max(0.0, deadline - self._clock())))
            try:
                return self.get(round_number)
            except (RoundNotAvailableError, BeaconUnavailableError, FutureRoundError) as exc:
                if self._clock() >= deadline:
                    raise BeaconTimeoutError(
                        f"round {round_number} still unavailable at the deadline: {exc}"
                    ) from exc
                self._sleep(poll)

    def close(self) -> None:
        self._http.close()
        self._cache.close()

    def __enter__(self) -> BeaconClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------

    def _over_endpoints(self, what: str, attempt: Callable[[str], T]) -> T:
        """Try each endpoint in order, for ``retries + 1`` passes; log every refusal."""
        failures: dict[str, BeaconError] = {}

        def one_pass() -> T:
            for endpoint in self.endpoints:
                try:
                    return attempt(endpoint)
                except BeaconError as exc:
                    logger.warning("beacon %s from %s refused: %s", what, endpoint, exc)
                    failures[endpoint] = exc
            if all(isinstance(e, RoundNotAvailableError) for e in failures.values()):
                raise RoundNotAvailableError(f"{what} is not yet published by any endpoint")
            summary = "; ".join(f"{e}: {exc}" for e, exc in failures.items())
            raise BeaconUnavailableError(
                f"no endpoint gave a verified {what} after {self.retries + 1} passes ({summary})"
            )

        policy = Backoff(self.retries + 1, self.backoff_s)
        return retry(
            one_pass,
            policy,
            retry_on=lambda exc: type(exc) is BeaconUnavailableError,
            sleep=self._sleep,
            what=f"beacon {what}",
        )

    def _check_endpoint(self, endpoint: str) -> ChainInfo:
        body = self._get_bytes(endpoint, f"/{self.chain.chain_hash_hex}/info", not_yet=False)
        served = parse_chain_info(body)
        check_same_chain(self.chain, served)
        with self._lock:
            self._checked.add(endpoint)
        return served

    def _fetch(self, endpoint: str, which: str, expected_round: int | None) -> Beacon:
        if endpoint not in self._checked:
            self._check_endpoint(endpoint)
        path = f"/{self.chain.chain_hash_hex}/public/{which}"
        body = self._get_bytes(endpoint, path, not_yet=expected_round is not None)
        beacon = beacon_from_json(self.chain, body, expected_round=expected_round)
        self._check_not_future(beacon.round)
        self._cache.put(self.chain.chain_hash, beacon)
        return beacon

    def _check_not_future(self, round_number: int) -> None:
        due = time_of_round(self.chain, round_number)
        now = self._clock()
        if due > now + self.max_clock_skew_s:
            raise FutureRoundError(
                f"round {round_number} is not due until unix time {due} "
                f"({due - now:.1f} s from now by the local clock)"
            )

    def _get_bytes(self, endpoint: str, path: str, *, not_yet: bool) -> bytes:
        """GET ``endpoint + path``: status 200 and at most MAX_RESPONSE_BYTES, in time."""
        started = time.monotonic()
        try:
            with self._http.stream("GET", endpoint + path) as response:
                if not_yet and response.status_code in NOT_YET_STATUSES:
                    raise RoundNotAvailableError(f"{endpoint} has not published it yet")
                if response.status_code != 200:
                    raise EndpointError(f"{endpoint}{path} answered HTTP {response.status_code}")
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise EndpointError(f"{endpoint}{path} answered over {size} bytes")
                    if time.monotonic() - started > self.timeout_s:
                        raise EndpointError(f"{endpoint}{path} took over {self.timeout_s} s")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise EndpointError(f"{endpoint}{path} failed: {type(exc).__name__}: {exc}") from exc
        return b"".join(chunks)
