"""``run --follow`` and ``watch --follow`` wait for a service or relay that is away.

At start (the manifest read) and in the loop, a peer that gives no answer or fails (5xx)
is ``service_unreachable`` / ``relay_unreachable`` and is waited out with backoff, 1 s
doubling to 30 s; a refusal that is a configuration error (an unknown run: 404) still
ends the command, and the one-shot commands fail at once. The same waits against a real
service that starts late: ``tests/ops/test_errors.py``.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.miner import context
from hypertrain.miner.actions import follow_rounds, watch_passes
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext, load_run
from hypertrain.miner.report import Reporter
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.errors import RelayError

AWAY = ServiceError("cannot reach the challenge service at http://svc (GET /x)", status=0)
FAILING = ServiceError("GET /x: HTTP 503: no_clock", status=503, code="no_clock")
UNKNOWN_RUN = ServiceError("GET /x: HTTP 404: unknown run run-1", status=404)
DECIDED = ServiceError("POST /a: HTTP 409: the game is decided", status=409, code="decided")
CONFIG = MinerConfig(service_url="http://svc", run_id="run-1", poll_s=0.5)


class FakeService:
    """Raises each queued error of a call in turn, then answers."""

    def __init__(self, **errors: list[Exception]) -> None:
        self.errors = errors
        self.calls: list[str] = []

    def _call(self, name: str, answer: Any) -> Any:
        self.calls.append(name)
        if self.errors.get(name):
            raise self.errors[name].pop(0)
        return answer

    def manifest_envelope(self, run_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._call("manifest_envelope", {"envelope": run_id}))

    def rounds(self, run_id: str) -> list[object]:
        return cast(list[object], self._call("rounds", []))

    def beacon_round(self) -> int:
        return cast(int, self._call("beacon_round", 7))


def _events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_the_manifest_read_waits_only_for_a_long_lived_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(context, "verify_manifest", lambda raw, run_id, coord: raw)
    waits: list[tuple[str, float]] = []
    service = FakeService(manifest_envelope=[AWAY])
    ctx = load_run(CONFIG, cast(ChallengeClient, service), check=False,
                   on_wait=lambda exc, delay: waits.append((str(exc), delay)))  # fmt: skip
    assert ctx.manifest == {"envelope": "run-1"} and waits == [(str(AWAY), 1.0)]
    refusing = FakeService(manifest_envelope=[UNKNOWN_RUN])
    with pytest.raises(ServiceError, match="unknown run"):  # a configuration error
        load_run(CONFIG, cast(ChallengeClient, refusing), check=False,
                 on_wait=lambda exc, delay: waits.append((str(exc), delay)))  # fmt: skip
    one_shot = FakeService(manifest_envelope=[AWAY])
    with pytest.raises(ServiceError, match="cannot reach"):  # no on_wait: fails at once
        load_run(CONFIG, cast(ChallengeClient, one_shot), check=False)
    assert one_shot.calls == ["manifest_envelope"] and len(waits) == 1


def _ctx(service: FakeService) -> RunContext:
    manifest = SimpleNamespace(run_id="run-1", round=SimpleNamespace(dispute_window_rounds=3))
    return RunContext(CONFIG, cast(ChallengeClient, service), cast(Any, manifest))


def test_run_follow_waits_out_an_absent_service_with_backoff() -> None:
    service = FakeService(rounds=[AWAY, FAILING, AWAY])
    stream, slept = io.StringIO(), []
    follow_rounds(_ctx(service), Hotkey.from_seed(b"\x05" * 32), cast(ChallengeClient, service),
                  Reporter("miner", stream, tty=False), stop=lambda: len(slept) >= 5,
                  sleep=slept.append)  # fmt: skip
    events = _events(stream)
    assert [e["event"] for e in events] == ["service_unreachable"] * 3
    assert [e["retry_in_s"] for e in events] == [1.0, 2.0, 4.0]
    assert slept == [1.0, 2.0, 4.0, 0.5, 0.5]  # then a pass at every poll


def test_run_follow_ends_on_a_refusal() -> None:
    service = FakeService(rounds=[AWAY, UNKNOWN_RUN])
    stream = io.StringIO()
    with pytest.raises(ServiceError, match="unknown run"):
        follow_rounds(_ctx(service), Hotkey.from_seed(b"\x05" * 32),
                      cast(ChallengeClient, service), Reporter("miner", stream, tty=False),
                      sleep=lambda s: None)  # fmt: skip
    assert [e["event"] for e in _events(stream)] == ["service_unreachable"]


def test_watch_follow_backs_off_for_a_peer_away_and_not_for_a_refusal() -> None:
    failures: list[Exception] = [
        AWAY,
        RelayError("http_error", "relay answered 502: bad gateway", 502),
        DECIDED,
        AWAY,
    ]
    passes, slept, stream = [0], [], io.StringIO()

    def one_pass() -> None:
        passes[0] += 1
        if failures:
            raise failures.pop(0)

    watch_passes(one_pass, Reporter("miner", stream, tty=False), follow=True, poll_s=0.5,
                 stop=lambda: passes[0] >= 5, sleep=slept.append)  # fmt: skip
    events = _events(stream)
    assert [e["event"] for e in events] == [
        "service_unreachable", "relay_unreachable", "service_refused", "service_unreachable",
    ]  # fmt: skip
    assert slept == [1.0, 2.0, 0.5, 1.0]  # a refusal: the next pass at the poll
