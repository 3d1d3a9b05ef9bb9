"""The roles' shared event lines and poll loop."""

from __future__ import annotations

import json

import pytest

from hypertrain.api.errors import ServiceError
from hypertrain.protocol.retry import Backoff
from hypertrain.relay.errors import RelayError
from hypertrain.rolekit import peer_away, poll, role_events, when_up


def test_an_event_is_one_sorted_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    role_events("referee")("ruling", op="matmul", seconds=0.5)
    line = capsys.readouterr().out
    assert line.endswith("\n") and line.count("\n") == 1
    doc = json.loads(line)
    assert {k: doc[k] for k in ("role", "event", "op", "seconds")} == {
        "role": "referee", "event": "ruling", "op": "matmul", "seconds": 0.5,
    }  # fmt: skip
    assert list(doc) == sorted(doc) and isinstance(doc["ts"], float)


def test_passes_repeat_until_stopped_and_passing_failures_are_reported() -> None:
    passes: list[int] = []
    waits: list[float] = []
    reported: list[tuple[str, float]] = []

    def one_pass() -> None:
        passes.append(1)
        if len(passes) == 2:
            raise OSError("service away")

    def report(exc: Exception, delay: float) -> None:
        reported.append((str(exc), delay))

    poll(one_pass, poll_s=0.5, stop=lambda: len(passes) >= 3, passing=(OSError,),
         on_error=report, sleep=waits.append)  # fmt: skip
    assert len(passes) == 3 and waits == [0.5, 0.5, 0.5]
    assert reported == [("service away", 0.5)]


def test_any_other_failure_ends_the_loop() -> None:
    def one_pass() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        poll(one_pass, poll_s=0, stop=lambda: False, passing=(OSError,), sleep=lambda s: None)


def test_failures_in_a_row_back_off_up_to_the_cap_and_a_pass_resets() -> None:
    outcomes = iter([OSError(), OSError(), OSError(), None, OSError()])
    waits: list[float] = []

    def one_pass() -> None:
        exc = next(outcomes)
        if exc is not None:
            raise exc

    backoff = Backoff(attempts=1, first_delay_s=1.0)
    poll(one_pass, poll_s=1.0, stop=lambda: len(waits) >= 5, passing=(OSError,),
         backoff=backoff, max_delay_s=3.0, sleep=waits.append)  # fmt: skip
    assert waits == [1.0, 2.0, 3.0, 1.0, 1.0]


def test_a_peer_away_is_no_answer_or_a_failure_never_a_refusal() -> None:
    assert peer_away(ServiceError("cannot reach", status=0))
    assert peer_away(ServiceError("HTTP 503", status=503))
    assert peer_away(RelayError("unreachable", "refused", 0))
    assert peer_away(RelayError("upstream_failed", "502", 502))
    assert not peer_away(ServiceError("HTTP 404: unknown run", status=404))
    assert not peer_away(RelayError("too_large", "413", 413))
    assert not peer_away(KeyError("a bug"))


def test_when_up_raises_a_refusal_at_once() -> None:
    answers: list[Exception | str] = [ServiceError("away", status=0), "up"]
    waits: list[float] = []

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert when_up(call, on_wait=lambda e, d: waits.append(d), sleep=lambda s: None) == "up"
    assert waits == [1.0]
    answers[:] = [ServiceError("HTTP 401", status=401)]
    with pytest.raises(ServiceError, match="401"):
        when_up(call, on_wait=lambda e, d: waits.append(d), sleep=lambda s: None)
    assert waits == [1.0]
