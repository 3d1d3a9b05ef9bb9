"""A tape witness or aggregator (re)started while its service is away waits for it.

The devnet's kill-and-restart showed it: restarted while the challenge service was itself
restarting, the witness read the manifest once, failed to connect and exited 1. It now
waits with backoff while the service cannot be reached or fails (5xx), stops within a
second of its stop signal, and still exits on a refusal (4xx), which is a configuration
error.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from hypertrain.aggregator.cli import START_MAX_DELAY_S, manifest_when_up
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError


class FlakyService:
    """Fails with ``errors`` in turn, then answers ``manifest``."""

    def __init__(self, errors: list[ServiceError], manifest: object) -> None:
        self.errors, self.answer, self.calls = list(errors), manifest, 0

    def manifest(self, run_id: str) -> object:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.answer


def _wait(
    service: FlakyService, stop_after_sleeps: int | None = None
) -> tuple[object, list[dict[str, Any]], list[float]]:
    events: list[dict[str, Any]] = []
    slept: list[float] = []

    def stop() -> bool:
        return stop_after_sleeps is not None and len(slept) >= stop_after_sleeps

    fetch = cast(ChallengeClient, service).manifest
    got = manifest_when_up(lambda: fetch("run"), events.append, stop, slept.append)
    return got, events, slept


def test_an_absent_or_failing_service_is_waited_for_with_backoff() -> None:
    away = ServiceError("cannot reach the challenge service", status=0)
    failing = ServiceError("HTTP 503: no_clock", status=503)
    service = FlakyService([away] * 7 + [failing], manifest="the manifest")
    got, events, slept = _wait(service)
    assert got == "the manifest" and service.calls == 9
    assert [e["event"] for e in events] == ["service_unreachable"] * 8
    delays = [e["retry_in_s"] for e in events]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert max(delays) == START_MAX_DELAY_S and sum(slept) == sum(delays)


def test_a_stop_signal_ends_the_wait_within_a_second() -> None:
    away = ServiceError("cannot reach the challenge service", status=0)
    service = FlakyService([away] * 100, manifest="never")
    got, events, slept = _wait(service, stop_after_sleeps=20)
    assert got is None and len(slept) == 20 and service.calls == len(events)


def test_a_refusal_is_a_configuration_error_and_ends_the_role() -> None:
    service = FlakyService([ServiceError("HTTP 404: unknown run", status=404)], manifest=None)
    with pytest.raises(ServiceError, match="unknown run"):
        _wait(service)
    assert service.calls == 1
