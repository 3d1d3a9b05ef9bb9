"""Admission passes run beside the audit loop, never in it (``run --follow``).

A check of a large claim builds its table for minutes; under ``--follow`` the passes run
in their own thread (:class:`hypertrain.auditor.admission.AdmissionWorker`), so the
auditor's own work goes on while one is running. The tests synchronise on events, never
on time.
"""

from __future__ import annotations

import threading

from hypertrain.api.errors import ServiceError
from hypertrain.auditor.admission import AdmissionWorker

WAIT_S = 30.0  # an upper bound for a thread to be scheduled, never reached when it works


def _never(_exc: Exception) -> bool:
    return False


def test_a_running_admission_pass_does_not_hold_the_caller() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_pass() -> None:  # a check building a large table
        entered.set()
        release.wait(WAIT_S)

    worker = AdmissionWorker(slow_pass, poll_s=0.0, emit=lambda *a, **k: None, fatal=_never)
    worker.start()
    assert entered.wait(WAIT_S)  # the pass is running ...
    audited = ["round 0"]  # ... and the caller's loop does its own work meanwhile
    assert worker.passes == 0 and audited == ["round 0"]
    release.set()
    worker.close()
    assert worker.passes >= 1 and worker.failure is None  # a further pass may have run


def test_a_failing_pass_is_reported_and_the_next_one_runs() -> None:
    calls: list[int] = []
    events: list[str] = []
    second = threading.Event()

    def flaky_pass() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("one bad pass")
        second.set()

    worker = AdmissionWorker(
        flaky_pass, poll_s=0.0, emit=lambda e, **f: events.append(f"{e} {f}"), fatal=_never
    )
    worker.start()
    assert second.wait(WAIT_S)
    worker.close()
    assert events and "one bad pass" in events[0] and worker.failure is None


def test_the_service_refusing_the_worker_stops_the_thread_for_the_caller_to_raise() -> None:
    def refused_pass() -> None:
        raise ServiceError("not a worker", 403, "forbidden")

    worker = AdmissionWorker(
        refused_pass, poll_s=0.0, emit=lambda *a, **k: None, fatal=lambda e: True
    )
    worker.start()
    worker.close()
    assert isinstance(worker.failure, ServiceError) and worker.passes == 0
