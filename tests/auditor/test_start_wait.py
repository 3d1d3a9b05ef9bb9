"""``auditor run --follow`` waits for an absent service or relay; a refusal still ends it.

At start and in its loop, a service or relay that gives no answer or fails (5xx) is an
event (``service_unreachable``, ``relay_unreachable``) and is waited out with backoff,
1 s doubling to 30 s; a refusal (the worker token 401, an unknown run 404, a relay URL
that answers 404) is a configuration error and ends the command with one line; the
one-shot ``--round W`` still fails at once. The same wait against a real service that
starts late: ``tests/ops/test_errors.py``.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, cast

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor import start
from hypertrain.auditor.follow import follow
from hypertrain.auditor.runner import Auditor
from hypertrain.auditor.start import AuditorRefusedError, start_manifest
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.errors import RelayError

AWAY = ServiceError("cannot reach the challenge service at http://svc (GET /x)", status=0)
FAILING = ServiceError("GET /x: HTTP 503: no_clock", status=503, code="no_clock")
KEY = Hotkey.from_seed(b"\x07" * 32)
RELAY_AWAY = RelayError("unreachable", "cannot reach the relay at relay:1: refused", 0)


class FakeService:
    """Raises each queued error of a call in turn, then answers."""

    base_url = "http://svc"

    def __init__(self, **errors: list[Exception]) -> None:
        self.errors = errors
        self.calls: list[str] = []

    def _call(self, name: str, answer: Any) -> Any:
        self.calls.append(name)
        queued = self.errors.get(name, [])
        if queued:
            raise queued.pop(0)
        return answer

    def admissions(self, run_id: str) -> list[object]:
        return cast(list[object], self._call("admissions", []))

    def manifest_envelope(self, run_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._call("manifest_envelope", {"envelope": run_id}))

    def rounds(self, run_id: str) -> list[object]:
        return cast(list[object], self._call("rounds", []))

    def disputes(self, run_id: str) -> list[object]:
        return []

    def reassigned(self, run_id: str) -> list[object]:
        return []


@pytest.fixture
def relay_errors(monkeypatch: pytest.MonkeyPatch) -> list[Exception]:
    """The relay's health answers after raising these; the envelope always verifies."""
    errors: list[Exception] = []

    def health(url: str) -> None:
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(start, "relay_health", health)
    monkeypatch.setattr(start, "verify_manifest", lambda raw, run_id, coord: ("manifest", raw))
    return errors


def _start(
    service: FakeService, *, follow: bool, stop_after_sleeps: int | None = None
) -> tuple[object, list[tuple[str, dict[str, Any]]], list[float]]:
    events: list[tuple[str, dict[str, Any]]] = []
    slept: list[float] = []

    def stop() -> bool:
        return stop_after_sleeps is not None and len(slept) >= stop_after_sleeps

    got = start_manifest(cast(ChallengeClient, service), "http://relay:1", "run-1", None,
                         follow=follow, emit=lambda e, **f: events.append((e, f)), stop=stop,
                         sleep=slept.append)  # fmt: skip
    return got, events, slept


def test_follow_waits_for_the_service_and_the_relay(relay_errors: list[Exception]) -> None:
    relay_errors += [RELAY_AWAY, RelayError("http_error", "the relay answered HTTP 502", 502)]
    service = FakeService(admissions=[AWAY, FAILING], manifest_envelope=[AWAY])
    got, events, slept = _start(service, follow=True)
    assert got == ("manifest", {"envelope": "run-1"})
    assert [e for e, _ in events] == ["service_unreachable"] * 2 + ["relay_unreachable"] * 2 + [
        "service_unreachable"
    ]
    delays = [f["retry_in_s"] for _, f in events]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0] and sum(slept) == sum(delays)
    assert "cannot reach the relay at relay:1" in events[2][1]["detail"]


@pytest.mark.parametrize(
    ("errors", "relay", "expected"),
    [
        ({"admissions": [AWAY, ServiceError("HTTP 401", status=401)]}, [],
         "refused the worker token (401)"),
        ({"manifest_envelope": [ServiceError("HTTP 404: unknown run run-1", status=404)]}, [],
         "unknown run run-1"),
        ({}, [RELAY_AWAY, RelayError("http_error", "the relay at r answered HTTP 404", 404)],
         "the relay at r answered HTTP 404"),
    ],
)  # fmt: skip
def test_a_refusal_ends_follow_with_one_line(
    relay_errors: list[Exception],
    errors: dict[str, list[Exception]],
    relay: list[Exception],
    expected: str,
) -> None:
    relay_errors += relay
    with pytest.raises(AuditorRefusedError, match=re.escape(expected)) as caught:
        _start(FakeService(**errors), follow=True)
    assert "\n" not in str(caught.value)


def test_the_one_shot_command_fails_at_once(relay_errors: list[Exception]) -> None:
    service = FakeService(admissions=[AWAY])
    with pytest.raises(AuditorRefusedError, match="cannot reach the challenge service"):
        _start(service, follow=False)
    assert service.calls == ["admissions"]
    relay_errors.append(RELAY_AWAY)
    with pytest.raises(AuditorRefusedError, match="cannot reach the relay at relay:1"):
        _start(FakeService(), follow=False)


def test_a_stop_signal_ends_the_wait_within_a_second(relay_errors: list[Exception]) -> None:
    service = FakeService(admissions=[AWAY] * 100)
    got, events, slept = _start(service, follow=True, stop_after_sleeps=20)
    assert got is None and slept == [1.0] * 20 and len(events) == len(service.calls)


def test_the_follow_loop_waits_out_an_absent_service_with_backoff() -> None:
    service = FakeService(rounds=[AWAY, FAILING, AWAY, AWAY])
    manifest = SimpleNamespace(run_id="run-1", admission=SimpleNamespace(challenge=False))
    auditor = Auditor(cast(Any, service), cast(Any, None), KEY, cast(Any, manifest),
                      cast(Any, None))  # fmt: skip
    events: list[tuple[str, dict[str, Any]]] = []
    slept: list[float] = []
    follow(auditor, poll_s=0.5, stop=lambda: len(slept) >= 6, sleep=slept.append,
           emit=lambda e, **f: events.append((e, f)))  # fmt: skip
    assert [e for e, _ in events] == ["service_unreachable"] * 4, events
    assert slept == [1.0, 2.0, 4.0, 8.0, 0.5, 0.5]  # then the passes go on at the poll
    assert service.calls.count("rounds") == 6


def test_a_refusal_in_the_loop_ends_it() -> None:
    service = FakeService(rounds=[AWAY, ServiceError("HTTP 403: not a worker", status=403)])
    manifest = SimpleNamespace(run_id="run-1", admission=SimpleNamespace(challenge=False))
    auditor = Auditor(cast(Any, service), cast(Any, None), KEY, cast(Any, manifest),
                      cast(Any, None))  # fmt: skip
    with pytest.raises(ServiceError, match="not a worker"):
        follow(
            auditor, poll_s=0, stop=lambda: False, sleep=lambda s: None, emit=lambda e, **f: None
        )
