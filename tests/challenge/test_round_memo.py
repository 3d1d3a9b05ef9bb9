"""The polled views are read once per write, and answer exactly what a fresh read answers.

``GET /v1/runs/{run}/rounds`` (and the roster, summary, loss and dashboard views that share
its facts) is kept by :meth:`~hypertrain.challenge.state.ServiceState.memo` until the
database's next write. The run below plays every kind of write that changes a final
round's record: a dispute's ruling (overturned, its auditor's pass set aside), a merge, a
late verdict whose own window then closes (a proven fault), and a merge correction (the
rollback) that answers it. After each, the served bytes must equal those of a fresh read.
"""

from __future__ import annotations

import sqlite3
from itertools import pairwise

from pytest import MonkeyPatch

from hypertrain.challenge import facts
from hypertrain.challenge.rounds import views
from hypertrain.challenge.state import ServiceState
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RUN,
    WINDOW,
    Service,
    lose_by_silence,
    merge_round_0,
    service,
    to_verdict,
    verdict_on,
)
from tests.challenge.helpers import AGGREGATOR, bearer, signed

__all__ = ["service"]

POLLED = (
    f"/v1/runs/{RUN}/rounds",
    f"/v1/runs/{RUN}/rounds/0",
    f"/v1/runs/{RUN}",
    f"/v1/runs/{RUN}/roster",
    f"/v1/runs/{RUN}/loss",
    f"/v1/runs/{RUN}/faults",
    f"/v1/runs/{RUN}/dashboard",
)


def _state(svc: Service) -> ServiceState:
    state: ServiceState = svc.client.app.state.service  # type: ignore[attr-defined]
    return state


def _served_as_fresh(svc: Service) -> list[bytes]:
    """Serve every polled view twice (the second a kept answer), then again with nothing
    kept; all three must be the same bytes."""
    first = [svc.client.get(path).content for path in POLLED]
    kept = [svc.client.get(path).content for path in POLLED]
    _state(svc)._memos.clear()
    fresh = [svc.client.get(path).content for path in POLLED]
    assert first == kept == fresh
    return fresh


def _correct_round_0(svc: Service) -> None:
    """The aggregator's signed correction of round 0 without island 1, answering its
    proven fault (the rollback)."""
    dropped = ISLANDS[1].ss58_address
    corrected = {
        "round": 0, "start_model_sha256": "aa" * 32, "new_model_sha256": "ef" * 32,
        "new_model_url": "u2", "outer_state_sha256": "cd" * 32, "tape_sha256": "ee" * 32,
        "included": sorted(k.ss58_address for k in ISLANDS if k.ss58_address != dropped),
        "excluded": {dropped: "audit_mismatch"},
    }  # fmt: skip
    body = {
        "supersedes_tape_sha256": "dd" * 32,
        "faults": [{"round": 0, "hotkey": dropped}],
        "tape": corrected,
    }
    answer = svc.client.post(
        "/worker/v1/merge-correction",
        headers=bearer("worker"),
        json=signed(AGGREGATOR, "merge-correction", body, RUN),
    )
    assert answer.status_code == 200, answer.text


def test_every_write_is_seen_by_the_next_poll(service: Service) -> None:
    seen = [_served_as_fresh(service)]
    verdict_id, segment = to_verdict(service)  # island 0: a mismatch
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200  # a lie
    seen.append(_served_as_fresh(service))
    lose_by_silence(service, verdict_id, segment)
    service.tick(4)  # the auditor misses its deadline: overturned
    assert verdict_on(service, REFEREE, ISLANDS[0], "match").status_code == 200
    seen.append(_served_as_fresh(service))
    service.tick(20)
    merge_round_0(service)
    service.tick()
    seen.append(_served_as_fresh(service))
    assert verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch").status_code == 200
    seen.append(_served_as_fresh(service))
    service.tick(WINDOW + 1)  # the late verdict's window closes: a proven fault
    seen.append(_served_as_fresh(service))
    _correct_round_0(service)
    seen.append(_served_as_fresh(service))
    # every step changed what the views say
    changed = [
        [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y] for a, b in pairwise(seen)
    ]
    assert all(changed), changed


def test_a_poll_between_writes_reads_nothing(service: Service, monkeypatch: MonkeyPatch) -> None:
    to_verdict(service)
    reads: list[str] = []
    read = facts.run_accusations

    def counted(conn: sqlite3.Connection, run_id: str) -> dict[int, dict[str, str]]:
        reads.append(run_id)
        return read(conn, run_id)

    monkeypatch.setattr(facts, "run_accusations", counted)
    state = _state(service)
    views.round_summaries(state, RUN)
    reads.clear()
    views.round_summaries(state, RUN)
    views.roster(state, RUN)
    assert reads == []
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200
    views.round_summaries(state, RUN)
    views.roster(state, RUN)
    assert reads == [RUN]
