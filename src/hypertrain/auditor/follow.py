"""The auditor's long-lived loop: follow a run, audit every round it is assigned, answer
its disputes, stand by as a juror and recompute admission checks, until stopped.

A refusal of this auditor itself (401, 403: ``runner.refused``) stops the loop with the
reason; every other failure is an event and the loop goes on. A service that cannot be
reached or fails (5xx) when a pass starts is ``service_unreachable`` and is waited out
with backoff (1 s doubling to 30 s, ``rolekit.PEER_BACKOFF``), and a pass in which a peer
was away does not count against a round's attempts (``RoundProgress.away``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from hypertrain.api.errors import ServiceError
from hypertrain.auditor.admission import AdmissionWorker, check_admissions
from hypertrain.auditor.disputes import answer_disputes, answer_games
from hypertrain.auditor.runner import Auditor, RoundProgress, audit_round, emit_json, refused
from hypertrain.relay.errors import RelayError
from hypertrain.rolekit import PEER_BACKOFF, PEER_MAX_DELAY_S, Emit, peer_away, poll


def attending(auditor: Auditor, parties: dict[str, Any], emit: Emit) -> Callable[[], None]:
    """The ``attend`` hook of :func:`follow`: one pass over this auditor's games."""

    def attend() -> None:
        try:
            answer_games(auditor, parties, emit)
        except Exception as exc:  # a dispute must not stop the audits
            if refused(exc):
                raise
            emit("error", detail=f"disputes: {type(exc).__name__}: {exc}"[:500])

    return attend


def follow(
    auditor: Auditor,
    *,
    poll_s: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    emit: Emit = emit_json,
    max_attempts: int = 5,
    standby: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Audit each round of the run in its audit phase; loop until ``stop``.

    A round is done when every assignment has a posted verdict, or after
    ``max_attempts`` passes (each pass only retries the assignments still open).
    Pending dispute games are answered before each assignment and at every poll of
    an upload wait (``attend``), so an island that withholds cannot delay an answer.

    ``standby``: a standby juror (the service's ``HYPERTRAIN_STANDBY_HOTKEYS``) judges no
    assignment first and checks no admission: each pass only re-audits what the service
    lists as waiting (``/reassigned``: set aside, missed, split) and answers the games
    against those re-audits (:func:`~hypertrain.auditor.disputes.answer_disputes`).
    """
    progress: dict[int, RoundProgress] = {}
    done: set[int] = set()
    parties: dict[str, Any] = {}  # dispute id -> this auditor's replay of the segment
    auditor = replace(auditor, attend=attending(auditor, parties, emit))
    admissions = None if standby else admission_worker(auditor, poll_s, emit)

    def one_pass() -> None:
        if admissions is not None and admissions.failure is not None:
            raise admissions.failure
        if standby:
            _standby_pass(auditor, parties, emit)
        else:
            _follow_pass(auditor, progress, done, parties, emit, max_attempts)

    def away(exc: Exception, retry_in_s: float) -> None:
        if not peer_away(exc):
            raise exc  # a refusal of this auditor: the loop ends, the command says why
        peer = "service" if isinstance(exc, ServiceError) else "relay"
        emit(f"{peer}_unreachable", detail=str(exc)[:300], retry_in_s=retry_in_s)

    try:
        poll(one_pass, poll_s=poll_s, stop=stop, passing=(ServiceError, RelayError),
             on_error=away, backoff=PEER_BACKOFF, max_delay_s=PEER_MAX_DELAY_S,
             sleep=sleep)  # fmt: skip
    finally:
        if admissions is not None:
            admissions.close()


def _standby_pass(auditor: Auditor, parties: dict[str, Any], emit: Emit) -> None:
    """One pass of a standby juror: the re-audits and games only (see :func:`follow`)."""
    try:
        answer_disputes(auditor, parties, emit)
    except Exception as exc:  # the loop outlives any one bad answer
        if refused(exc) or peer_away(exc):
            raise  # a peer away is waited out by follow's loop
        emit("error", detail=f"disputes: {type(exc).__name__}: {exc}"[:500])


def admission_worker(auditor: Auditor, poll_s: float, emit: Emit) -> AdmissionWorker | None:
    """The admission passes of a run under the challenge, started in their own thread."""
    if not auditor.manifest.admission.challenge:
        return None

    def run_pass() -> None:
        check_admissions(
            auditor.service,
            auditor.key,
            auditor.manifest.run_id,
            device=torch.device(auditor.device),
            emit=emit,
        )

    return AdmissionWorker(run_pass, poll_s=poll_s, emit=emit, fatal=refused).start()


def _follow_pass(
    auditor: Auditor,
    progress: dict[int, RoundProgress],
    done: set[int],
    parties: dict[str, Any],
    emit: Emit,
    max_attempts: int,
) -> None:
    """One pass of :func:`follow`: every round in its audit phase, then the disputes."""
    try:
        summaries = auditor.service.rounds(auditor.manifest.run_id)
    except Exception as exc:  # the loop outlives any one bad answer
        if peer_away(exc) or refused(exc):
            raise  # a peer away is waited out by follow's loop, with backoff
        emit("error", detail=f"{type(exc).__name__}: {exc}"[:500])
        summaries = []
    for summary in summaries:
        index = -1
        try:
            index = summary.round
            if summary.phase != "audit" or index in done:
                continue
            state = progress.setdefault(index, RoundProgress())
            audit_round(auditor, index, emit, state)
            if state.unfinished == 0:
                done.add(index)
        except Exception as exc:
            if refused(exc):
                raise
            emit("error", detail=f"{type(exc).__name__}: {exc}"[:500])
        if index in progress and progress[index].attempts >= max_attempts:
            done.add(index)
    try:
        answer_disputes(auditor, parties, emit)
    except Exception as exc:  # a dispute must not stop the audits
        emit("error", detail=f"disputes: {type(exc).__name__}: {exc}"[:500])
