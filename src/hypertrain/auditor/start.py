"""How the auditor starts: its credentials, its peers and the signed manifest, checked
before any replay.

A one-shot ``--round W`` ends with one line (:class:`AuditorRefusedError`, exit status 1)
when the service or the relay refuses it or cannot be reached. ``--follow`` is a
long-lived role: a service or relay that gives no answer or fails (5xx) is waited out with
backoff, one event per try (``service_unreachable``, ``relay_unreachable``;
``rolekit.when_up``), so an auditor started a second before its peers does not fail the
network; a refusal (the worker token 401, a hotkey that is not a worker 403, an unknown
run 404, a relay URL that answers 4xx) is a configuration error and still ends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.auditor.runner import emit_json
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.errors import RelayError
from hypertrain.rolekit import Emit, when_up


class AuditorRefusedError(ValueError):
    """The service or relay refused this auditor, or cannot be reached: nothing to do."""


def relay_health(relay_url: str) -> None:
    """The relay's health route answers; else a :class:`RelayError` (status 0: no answer)."""
    health = relay_url.rstrip("/") + "/healthz"
    try:
        answer = httpx.get(health, timeout=10)
    except httpx.HTTPError as exc:
        host = httpx.URL(health).netloc.decode()
        reason = str(exc) or type(exc).__name__
        raise RelayError("unreachable", f"cannot reach the relay at {host}: {reason}", 0) from None
    if not answer.is_success:
        status = answer.status_code
        raise RelayError("http_error", f"the relay at {relay_url} answered HTTP {status}", status)


def checked_manifest(
    service: ChallengeClient, relay_url: str, run_id: str, coordinator: str | None
) -> RunManifest:
    """The worker token is accepted, the relay answers, and the run's signed manifest."""
    service.admissions(run_id)  # a worker route: checks the token, touches nothing
    relay_health(relay_url)
    return verify_manifest(service.manifest_envelope(run_id), run_id, coordinator)


def start_manifest(
    service: ChallengeClient,
    relay_url: str,
    run_id: str,
    coordinator: str | None,
    *,
    follow: bool,
    emit: Emit = emit_json,
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> RunManifest | None:
    """:func:`checked_manifest`, at once (one-shot) or once the peers are up (``follow``;
    None when ``stop()`` ends the wait). A refusal is :class:`AuditorRefusedError`."""

    def check() -> RunManifest:
        return checked_manifest(service, relay_url, run_id, coordinator)

    def waiting(exc: Exception, delay: float) -> None:
        peer = "service" if isinstance(exc, ServiceError) else "relay"
        emit(f"{peer}_unreachable", detail=_detail(exc)[:300], retry_in_s=delay)

    try:
        if not follow:
            return check()
        return when_up(check, on_wait=waiting, stop=stop, sleep=sleep)
    except (ServiceError, RelayError) as exc:
        raise AuditorRefusedError(refusal(exc, service.base_url)) from None


def _detail(exc: Exception) -> str:
    return exc.detail if isinstance(exc, RelayError) else str(exc)


def refusal(exc: ServiceError | RelayError, base_url: str) -> str:
    """What to do about a refusal of this auditor, in one line."""
    if isinstance(exc, RelayError):
        return exc.detail
    if exc.status == 401:
        return (
            f"the service at {base_url} refused the worker token (401): --worker-token-file must"
            " hold the token of the service's CHALLENGE_WORKER_TOKEN_FILE"
        )
    if exc.status == 403:
        return (
            f"the service at {base_url} refused this auditor (403): add its hotkey to the"
            f" service's HYPERTRAIN_WORKER_HOTKEYS ({exc})"
        )
    return str(exc)
