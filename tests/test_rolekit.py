"""The roles' shared event lines and poll loop."""

from __future__ import annotations

import json

import pytest

from hypertrain.protocol.retry import Backoff
from hypertrain.rolekit import poll, role_events


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
