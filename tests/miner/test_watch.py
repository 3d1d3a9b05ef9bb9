"""``watch --follow`` outlives its peers: a refusal, a failed relay or a service that is
away is one event, and the next pass goes on; only its own stop ends the loop."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from hypertrain.api.errors import ServiceError
from hypertrain.miner.actions import watch_passes
from hypertrain.miner.report import Reporter
from hypertrain.relay.errors import RelayError

DECIDED = ServiceError(
    "POST /v1/disputes/ab/answer: HTTP 409: the game is decided", status=409, code="decided"
)


def _passes(failures: list[Exception]) -> tuple[Callable[[], None], list[int]]:
    """A pass that raises each of ``failures`` in turn, then passes; and its pass count."""
    count = [0]

    def one_pass() -> None:
        count[0] += 1
        if failures:
            raise failures.pop(0)

    return one_pass, count


def test_watch_follow_survives_refusals_and_absent_peers() -> None:
    stream = io.StringIO()
    failures: list[Exception] = [
        DECIDED,
        ServiceError("POST /v1/disputes/ab/answer: HTTP 409: late", status=409, code="late"),
        RelayError("unreachable", "http://relay: connection refused", 0),
        RelayError("too_large", "blob too large", 413),
        ServiceError("GET /v1/runs/r/rounds failed: connection refused"),
    ]
    one_pass, count = _passes(failures)
    watch_passes(one_pass, Reporter("miner", stream, tty=False), follow=True, poll_s=0,
                 stop=lambda: count[0] >= 7)  # fmt: skip
    assert count[0] == 7  # every failure was one pass; the loop went on to its own stop
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e.get("status"), e.get("code")) for e in events] == [
        ("service_refused", 409, "decided"),
        ("service_refused", 409, "late"),
        ("relay_unreachable", None, None),
        ("relay_refused", 413, "too_large"),
        ("service_unreachable", None, None),
    ]
    assert "decided" in events[0]["reason"]


def test_a_single_watch_pass_reports_a_refusal_as_an_error() -> None:
    """Without --follow the pass is the command: its failure is the command's."""
    one_pass, count = _passes([DECIDED])
    with pytest.raises(ServiceError, match="decided"):
        watch_passes(one_pass, Reporter("miner", io.StringIO(), tty=False), follow=False,
                     poll_s=0)  # fmt: skip
    assert count[0] == 1
