"""How a long-lived role process runs: its event lines and its poll loop, written once.

Every role (auditor, referee, evaluator; the aggregator's lines too) reports on stdout
one JSON object per line, keys sorted and flushed at once, which the devnet and the
operators' tooling read (:func:`write_line`; :func:`role_events` adds the time, the role
and the event's name). A role that follows a run repeats one pass, then a pause, until
it is stopped (:func:`poll`): a failure the role names as passing is reported and the
loop goes on, with backoff if the role asks for it; anything else ends the loop. A role
that needs a peer (the challenge service, a relay) before its first pass waits for it
(:func:`when_up`): a peer that gives no answer or fails (5xx) is waited out with backoff,
so a role started a second before its peer does not fail the network, while a refusal
(4xx: an unknown run, a bad key or token) is a configuration error and is raised. Roles
never import each other, so what they share lives here, below them all.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from hypertrain.protocol.retry import Backoff

T = TypeVar("T")
Emit = Callable[..., None]  # emit(event, **fields)
OnError = Callable[[Exception, float], None]  # (the failure, seconds until the next pass)
# A peer away: the first wait is a second, then each doubles, up to the cap.
PEER_BACKOFF: Final = Backoff(attempts=1, first_delay_s=1.0)
PEER_MAX_DELAY_S: Final = 30.0


def write_line(doc: Mapping[str, Any]) -> None:
    """``doc`` as one JSON line on stdout (keys sorted), flushed."""
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def role_events(role: str) -> Emit:
    """The role's ``emit(event, **fields)``: one line with the time, role and event."""

    def emit(event: str, **fields: Any) -> None:
        write_line({"ts": round(time.time(), 3), "role": role, "event": event, **fields})

    return emit


def _no_report(exc: Exception, retry_in_s: float) -> None:
    """A loop that names no passing failure has none to report."""


def poll(
    one_pass: Callable[[], object],
    *,
    poll_s: float,
    stop: Callable[[], bool],
    passing: tuple[type[Exception], ...] = (),
    on_error: OnError = _no_report,
    backoff: Backoff | None = None,
    max_delay_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """``one_pass`` then a pause of ``poll_s``, until ``stop()`` (asked before each pass).

    A failure of a ``passing`` type goes to ``on_error`` with the seconds until the next
    pass (``on_error`` may raise to end the loop); any other failure ends it. With
    ``backoff``, the n-th failure in a row waits ``backoff.delay_s(n)``, at most
    ``max_delay_s``, instead of ``poll_s``.
    """
    failed = 0
    while not stop():
        try:
            one_pass()
            failed = 0
        except passing as exc:
            failed = min(failed + 1, 32)  # the delay is capped long before 2**31 s
            delay = poll_s if backoff is None else min(max_delay_s, backoff.delay_s(failed))
            on_error(exc, delay)
            sleep(delay)
            continue
        sleep(poll_s)


def peer_away(exc: BaseException) -> bool:
    """A peer that gave no answer (status 0) or failed (5xx): worth waiting for.

    The clients' errors (``hypertrain.api.errors.ServiceError``,
    ``hypertrain.relay.errors.RelayError``) carry the HTTP status, 0 when nothing
    answered; a refusal (4xx) and any error without a status are not a peer away.
    """
    status = getattr(exc, "status", None)
    return isinstance(status, int) and (status == 0 or status >= 500)


def peer_delay_s(failed: int) -> float:
    """The wait after ``failed`` (>= 1) tries in a row found a peer away: 1 s, doubling,
    at most ``PEER_MAX_DELAY_S``."""
    return min(PEER_MAX_DELAY_S, PEER_BACKOFF.delay_s(min(failed, 32)))


def when_up(
    call: Callable[[], T],
    *,
    on_wait: OnError,
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """``call()``'s answer, waiting while its peer is away (:func:`peer_away`).

    The n-th failure in a row goes to ``on_wait`` with the wait before the next try,
    :func:`peer_delay_s`, slept a second at a time
    so that ``stop()`` (the role's stop signal) ends the wait within a second; then
    None. Any other failure (a refusal: a configuration error) is raised at once.
    """
    failed = 0
    while not stop():
        try:
            return call()
        except Exception as exc:
            if not peer_away(exc):
                raise
            failed += 1
            delay = peer_delay_s(failed)
            on_wait(exc, delay)
            for _ in range(int(delay)):
                if stop():
                    break
                sleep(1.0)
    return None
