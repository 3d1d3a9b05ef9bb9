"""Rounds advance on work: commit and audit phases close early once their work is in.

The audit phase closes early only once a majority of the listed auditors judged every
assignment, so a fast first answer never shuts out a contrary one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hypertrain.challenge.lifecycle import clock
from hypertrain.challenge.rounds import pace
from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness
from tests.challenge.helpers import bearer, commit_body, join_body, signed

START = "aa" * 32


def _open(h: Harness) -> None:
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    r = h.client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": START, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text


def _detail(h: Harness) -> dict[str, Any]:
    detail: dict[str, Any] = h.client.get("/v1/runs/run-1/rounds/0").json()
    return detail


def _list_auditors(h: Harness, *keys: Hotkey) -> None:
    """The service's ``HYPERTRAIN_WORKER_HOTKEYS``, as if it had started with them."""
    listed = frozenset(k.ss58_address for k in keys)
    h.state.settings = replace(h.state.settings, worker_hotkeys=listed)


def _match_all(h: Harness, key: Hotkey) -> None:
    assigned = h.client.get(
        "/worker/v1/runs/run-1/rounds/0/assignments", headers=bearer("worker")
    ).json()
    for a in assigned:
        body = {"round": 0, "hotkey": a["body"]["hotkey"], "segments": a["body"]["segments"]}
        r = h.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(key, "verdict", {**body, "result": "match"}),
        )
        assert r.status_code == 200, r.text


def _commit(h: Harness, i: int) -> int:
    r = h.client.post("/v1/commit", json=signed(h.miners[i], "commit", commit_body(0)))
    return r.status_code


def test_commit_phase_closes_when_every_island_committed(harness: Harness) -> None:
    h = harness
    _open(h)  # opened at beacon 100, deadline 103
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    assert _detail(h)["phase"] == "train"  # the selecting beacon round does not exist yet
    h.tick(1)
    detail = _detail(h)
    assert detail["phase"] == "audit"
    assert detail["selection_beacon_round"] == 101  # first beacon after the last commit
    assert detail["commit_deadline_round"] == 103  # the signed deadline does not move


def test_a_commit_after_an_early_close_says_the_phase_closed(harness: Harness) -> None:
    h = harness
    _open(h)  # deadline 103
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)  # beacon 101: the commit phase closed early
    r = h.client.post("/v1/commit", json=signed(h.miners[0], "commit", commit_body(0)))
    assert (r.status_code, r.json()["error"]) == (409, "late"), r.text
    assert "is beacon round 103, but the round is in its audit phase" in r.text


def test_selection_is_the_beacon_after_the_last_commit(harness: Harness) -> None:
    h = harness
    _open(h)
    assert [_commit(h, i) for i in range(2)] == [200, 200]
    h.tick(1)
    assert _detail(h)["phase"] == "train"  # one island is still training
    assert _commit(h, 2) == 200
    h.tick(1)
    assert _detail(h)["selection_beacon_round"] == 102


def test_a_missing_island_holds_the_phase_until_the_deadline(harness: Harness) -> None:
    h = harness
    _open(h)
    assert [_commit(h, i) for i in range(2)] == [200, 200]
    # a duplicate and an outsider are refused and do not count towards closing
    assert _commit(h, 0) == 409
    outsider = h.client.post("/v1/commit", json=signed(h.miners[3], "commit", commit_body(0)))
    assert outsider.status_code == 403
    h.tick(3)
    assert _detail(h)["phase"] == "train"
    h.tick(1)
    assert _detail(h)["selection_beacon_round"] == 104


def test_audit_phase_closes_when_every_assignment_has_a_verdict(harness: Harness) -> None:
    h = harness
    _list_auditors(h, h.auditor)  # the only listed auditor is its own majority
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    assigned = h.client.get(
        "/worker/v1/runs/run-1/rounds/0/assignments", headers=bearer("worker")
    ).json()
    assert len(assigned) == 3  # round 0 is probation for everyone
    close = _detail(h)["audit_close_round"]
    for n, a in enumerate(assigned):
        body = {"round": 0, "hotkey": a["body"]["hotkey"], "segments": a["body"]["segments"]}
        r = h.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(h.auditor, "verdict", {**body, "result": "match"}),
        )
        assert r.status_code == 200, r.text
        h.client.portal.call(clock.advance, h.state)  # type: ignore[union-attr]
        assert _detail(h)["phase"] == ("merge" if n == len(assigned) - 1 else "audit")
    assert h.state.current is not None and h.state.current.round < close
    assert _detail(h)["dispute_deadline_round"] == close + 2  # disputes keep their window


def test_a_set_aside_verdict_does_not_close_the_audit_phase(harness: Harness) -> None:
    """A verdict whose auditor a dispute found faulty stops counting: the assignment is
    open again, so the phase waits for another auditor (or its window)."""
    h = harness
    _list_auditors(h, h.auditor)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    assigned = h.client.get(
        "/worker/v1/runs/run-1/rounds/0/assignments", headers=bearer("worker")
    ).json()
    for a in assigned:
        body = {"round": 0, "hotkey": a["body"]["hotkey"], "segments": a["body"]["segments"]}
        r = h.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(h.auditor, "verdict", {**body, "result": "match"}),
        )
        assert r.status_code == 200, r.text
    assert pace.audits_done(h.state, "run-1", 0)
    first = h.state.conn.execute(
        "SELECT verdict_id, hotkey, auditor FROM verdicts WHERE run_id = 'run-1' LIMIT 1"
    ).fetchone()
    h.state.conn.execute(
        "INSERT INTO reassigned_verdicts VALUES (?, 'run-1', 0, ?, ?, 'd-1', ?)",
        (first["verdict_id"], first["hotkey"], first["auditor"], h.beacon.round),
    )
    assert not pace.audits_done(h.state, "run-1", 0)
    h.client.portal.call(clock.advance, h.state)  # type: ignore[union-attr]
    assert _detail(h)["phase"] == "audit"


@pytest.mark.parametrize("listed", [0, 2, 3])
def test_a_fast_first_auditor_does_not_close_the_audit_phase_alone(
    harness: Harness, listed: int
) -> None:
    """One auditor's verdicts on every assignment close the phase only when it is a
    majority of the listed auditors; with none listed the window runs out."""
    h = harness
    others = [Hotkey.from_seed(bytes([0x70 + i]) * 32) for i in range(listed - 1)]
    if listed:
        _list_auditors(h, h.auditor, *others)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    _match_all(h, h.auditor)
    assert not pace.audits_done(h.state, "run-1", 0)
    h.client.portal.call(clock.advance, h.state)  # type: ignore[union-attr]
    assert _detail(h)["phase"] == "audit"  # a contrary verdict can still be heard
    if listed == 3:
        _match_all(h, others[0])  # two of three: a majority judged every assignment
        assert pace.audits_done(h.state, "run-1", 0)


def _stand_by(h: Harness, *keys: Hotkey) -> None:
    """The service's ``HYPERTRAIN_STANDBY_HOTKEYS``: listed auditors that re-audit only."""
    standby = frozenset(k.ss58_address for k in keys)
    h.state.settings = replace(h.state.settings, standby_hotkeys=standby)


def _jurors(n: int) -> list[Hotkey]:
    return [Hotkey.from_seed(bytes([0x60 + i]) * 32) for i in range(n)]


def test_standby_jurors_do_not_hold_the_audit_phase_open(harness: Harness) -> None:
    """Two silent standby jurors next to one auditor: that auditor is the active majority,
    so its verdicts close the phase (without the standby rule, a majority of three)."""
    h = harness
    jurors = _jurors(2)
    _list_auditors(h, h.auditor, *jurors)
    _stand_by(h, *jurors)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    _match_all(h, h.auditor)
    assert pace.audits_done(h.state, "run-1", 0)
    h.client.portal.call(clock.advance, h.state)  # type: ignore[union-attr]
    assert _detail(h)["phase"] == "merge"


def test_only_standby_jurors_never_close_the_phase_early(harness: Harness) -> None:
    """With every auditor on standby nobody is expected to judge first: the phase runs to
    its window, even once a standby juror judged everything."""
    h = harness
    jurors = _jurors(2)
    _list_auditors(h, *jurors)
    _stand_by(h, *jurors)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    _match_all(h, jurors[0])
    assert not pace.audits_done(h.state, "run-1", 0)


def test_a_standby_jurors_agreeing_verdict_counts_towards_the_majority(harness: Harness) -> None:
    """Two active auditors need two agreeing verdicts; a standby juror's is one of them, and
    one active auditor alone is not enough (the standby rule lowers no quorum below the
    active majority)."""
    h = harness
    other, juror = _jurors(2)
    _list_auditors(h, h.auditor, other, juror)
    _stand_by(h, juror)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    _match_all(h, h.auditor)
    assert not pace.audits_done(h.state, "run-1", 0)  # one of two active auditors
    _match_all(h, juror)
    assert pace.audits_done(h.state, "run-1", 0)


def _bar(h: Harness, key: Hotkey) -> None:
    """Record ``key`` as an auditor a dispute found faulty (its verdicts no longer count)."""
    h.state.conn.execute(
        "INSERT INTO faulty_auditors VALUES ('run-1', ?, 0, 'd-1')", (key.ss58_address,)
    )


def _waiting(h: Harness) -> list[str]:
    rows = h.client.get("/v1/runs/run-1/reassigned").json()
    return sorted(r["hotkey"] for r in rows if r["missed"])


def test_standby_jurors_stand_in_once_every_active_auditor_is_barred(harness: Harness) -> None:
    """The one active auditor is barred: nobody else would judge the round in its phase,
    so the standby jurors stand in. Its assignments are listed as waiting at once, and a
    majority of the jurors (two of two) closes the phase."""
    h = harness
    jurors = _jurors(2)
    _list_auditors(h, h.auditor, *jurors)
    _stand_by(h, *jurors)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    assert _waiting(h) == []  # the active auditor judges first
    _bar(h, h.auditor)
    assert _waiting(h) == sorted(k.ss58_address for k in h.miners[:3])
    _match_all(h, jurors[0])
    assert _waiting(h) == [] and not pace.audits_done(h.state, "run-1", 0)
    _match_all(h, jurors[1])
    assert pace.audits_done(h.state, "run-1", 0)


def test_a_barred_auditor_is_not_waited_for(harness: Harness) -> None:
    """Two listed auditors, one barred: its verdicts can never count, so the other's
    verdicts are the active majority and close the phase (no standby juror involved)."""
    h = harness
    (other,) = _jurors(1)
    _list_auditors(h, h.auditor, other)
    _open(h)
    assert [_commit(h, i) for i in range(3)] == [200, 200, 200]
    h.tick(1)
    _match_all(h, h.auditor)
    assert not pace.audits_done(h.state, "run-1", 0)  # one of two
    _bar(h, other)
    assert pace.audits_done(h.state, "run-1", 0)
    assert _waiting(h) == []  # no standby juror: nothing is listed in the phase
