"""The referee's loop: a pass that the service fails is an event, and the loop goes on."""

from __future__ import annotations

from typing import Any, cast

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.protocol.identity import Hotkey
from hypertrain.referee.worker import Referee, serve


class _Service:
    """Answers no game: away at the first poll, then nothing waits for a referee."""

    def __init__(self) -> None:
        self.polls = 0

    def disputes(self, run_id: str, stage: str) -> list[Any]:
        self.polls += 1
        if self.polls == 1:
            raise ServiceError("service away")
        return []


def test_a_failed_pass_is_an_error_event_and_the_next_pass_runs() -> None:
    service = _Service()
    referee = Referee(cast(ChallengeClient, service), Hotkey.from_seed(b"\x07" * 32), "run")
    events: list[tuple[str, dict[str, Any]]] = []
    serve(referee, poll_s=0, stop=lambda: service.polls >= 3,
          emit=lambda event, **kw: events.append((event, kw)))  # fmt: skip
    assert service.polls == 3
    assert events == [("error", {"detail": "service away"})]
