"""The dashboard's utilisation panel on a real service driven through a constructed
history: commits accepted at chosen beacon rounds, a round one island missed, audits
judged at chosen beacon rounds, and a boundary the service did not record."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from hypertrain.challenge.dashboard.models import Dashboard
from hypertrain.challenge.dashboard.utilisation import RoundClock, audit_end, island_round
from hypertrain.protocol.timeline import fold
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import START, post_merge
from tests.challenge.helpers import (
    bearer,
    commit_body,
    join_body,
    signed,
)

PERIOD = 3  # the test service follows no beacon info file: the quicknet's period


@dataclass
class Marks:
    """The beacon rounds one round's events happened at, as the test drove them."""

    opened: int
    commits: dict[str, int] = field(default_factory=dict)
    selected: int = 0
    assigned: list[str] = field(default_factory=list)
    verdicts: int = 0
    merged: int = 0


def _round(h: Harness, index: int) -> dict[str, Any]:
    r = h.client.get(f"/v1/runs/run-1/rounds/{index}")
    assert r.status_code == 200, r.text
    detail: dict[str, Any] = r.json()
    return detail


def _verdicts(h: Harness, index: int) -> list[str]:
    assigned = h.client.get(
        f"/worker/v1/runs/run-1/rounds/{index}/assignments", headers=bearer("worker")
    ).json()
    for a in assigned:
        verdict: dict[str, Any] = {
            "round": index,
            "hotkey": a["body"]["hotkey"],
            "segments": a["body"]["segments"],
            "result": "match",
        }
        r = h.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(h.auditor, "verdict", verdict),
        )
        assert r.status_code == 200, r.text
    return [a["body"]["hotkey"] for a in assigned]


def drive(h: Harness, skip: list[str | None]) -> list[Marks]:
    """Three islands through ``len(skip)`` rounds and the opening of the next: in each
    round island n commits n + 1 beacon rounds after the opening (``skip[r]``: the island
    that commits nothing in round r); the verdicts come a beacon round after the selection,
    the tape two after them, and the next round opens four after the tape (settled)."""
    keys = h.miners[:3]
    for key in keys:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body(micro_batches=1)))
    out, model = [], START
    for index in range(len(skip) + 1):
        body = (
            {"start_model_sha256": START, "start_model_url": "http://relay/m0"} if not index else {}
        )
        r = h.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json=body)
        assert r.status_code == 200, r.text
        m = Marks(opened=h.beacon.round)
        out.append(m)
        if index == len(skip):
            return out
        for key in keys:
            h.tick(1)
            if skip[index] != key.ss58_address:
                commit = commit_body(index, tokens=1000, loss=5.0)
                assert h.client.post("/v1/commit", json=signed(key, "commit", commit)).is_success
                m.commits[key.ss58_address] = h.beacon.round
        while _round(h, index)["selection_beacon_round"] is None:  # the close, then the beacon
            h.tick(1)
        m.selected = h.beacon.round
        h.tick(1)
        m.assigned, m.verdicts = _verdicts(h, index), h.beacon.round
        h.tick(2)
        m.merged = h.beacon.round
        model = post_merge(h, index, model, sorted(m.commits))
        h.tick(4)
    return out


def expected(marks: list[Marks], hotkey: str) -> dict[str, int]:
    """One island's beacon rounds by cause, from the marks the test drove (not the panel's
    code): busy to its commit, then the close (the beacon round before the selection),
    the selection, the last verdict, the tape and the next opening."""
    out: dict[str, int] = {}
    for m, nxt in pairwise(marks):
        c = m.commits.get(hotkey)
        judged = m.verdicts if m.assigned else m.selected
        parts = (
            {"missed": nxt.opened - m.opened}
            if c is None
            else {
                "busy": c - m.opened,
                "deadline": m.selected - 1 - c,
                "beacon": 1,
                "audit": judged - m.selected,
                "merge": m.merged - judged,
                "open": nxt.opened - m.merged,
            }
        )
        for k, v in parts.items():
            out[k] = out.get(k, 0) + v
    return out


def _check_sums(u: dict[str, Any]) -> None:
    """Every second is busy or one cause: per row, busy plus the waits is the wall time,
    and all islands together is the sum of the islands."""
    for row in [u["all"], *u["islands"]]:
        assert row["busy_s"] + sum(row["waiting_s"].values()) == row["wall_s"], row
        assert row["busy"] == round(row["busy_s"] / row["wall_s"], 4)
        assert all(v >= 0 for v in row["waiting_s"].values())
    for key in ("busy_s", "wall_s", "rounds", "committed"):
        assert u["all"][key] == sum(i[key] for i in u["islands"])
    for cause in u["causes"]:
        assert u["all"]["waiting_s"][cause] == sum(
            i["waiting_s"].get(cause, 0) for i in u["islands"]
        )


def test_utilisation_from_the_services_records(harness: Harness) -> None:
    miners = [k.ss58_address for k in harness.miners[:3]]
    marks = drive(harness, [None, miners[2]])  # island 2 misses round 1
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    assert Dashboard.model_validate(d).utilisation.rounds == 2  # round 2 is still open
    u = d["utilisation"]
    assert d["beacon"]["period_s"] == u["period_s"] == PERIOD
    _check_sums(u)
    names = {i["hotkey"]: i["name"] for i in d["islands"]}
    assert [i["hotkey"] for i in u["islands"]] == [i["hotkey"] for i in d["islands"]]
    for row in u["islands"]:
        want = {k: v * PERIOD for k, v in expected(marks, row["hotkey"]).items()}
        assert row["name"] == names[row["hotkey"]] and row["rounds"] == 2
        assert row["busy_s"] == want.pop("busy")
        assert row["waiting_s"] == want
        assert row["wall_s"] == (marks[2].opened - marks[0].opened) * PERIOD
    # the history in numbers: round 0 opens at beacon 100, commits at 101/102/103 close it
    # at 103, selection 104, verdicts 105, tape 107; round 1 opens at 111, commits at
    # 112/113, island 2 silent, the deadline 114 closes it, selection 115, verdicts 116,
    # tape 118; round 2 opens at 122
    assert [m.opened for m in marks] == [100, 111, 122]
    first, second, third = u["islands"]
    assert (first["busy_s"], first["waiting_s"]["deadline"]) == ((1 + 1) * 3, (2 + 2) * 3)
    assert (second["busy_s"], second["waiting_s"]["deadline"]) == ((2 + 2) * 3, (1 + 1) * 3)
    assert first["waiting_s"]["open"] == (4 + 4) * 3 and "missed" not in first["waiting_s"]
    assert third["committed"] == 1 and third["waiting_s"]["missed"] == 11 * 3
    assert third["waiting_s"]["deadline"] == 0  # its commit closed round 0: a recorded zero
    assert third["busy_s"] == 3 * 3 and third["busy"] == round(9 / 66, 4)
    a = u["all"]
    assert (a["rounds"], a["committed"], a["wall_s"]) == (6, 5, 3 * 22 * 3)
    assert a["busy_s"] == (1 + 2 + 3 + 1 + 2) * 3 and a["waiting_s"]["missed"] == 33
    assert a["waiting_share"]["missed"] == round(33 / 198, 4)
    assert u["causes"] == ["deadline", "beacon", "audit", "merge", "open", "missed"]
    assert "upper bound" in u["busy_words"]


def test_an_unrecorded_boundary_joins_the_next_cause(harness: Harness) -> None:
    """Round 1's audit end not recorded (no verdict stored, no audit close): its audit
    wait and its merge wait are one ``audit+merge``, never an audit of zero seconds."""
    miners = [k.ss58_address for k in harness.miners[:3]]
    marks = drive(harness, [None, miners[2]])
    conn = harness.state.conn
    with conn:
        conn.execute("DELETE FROM verdicts WHERE run_id = 'run-1' AND round = 1")
        conn.execute("UPDATE rounds SET audit_close_round = NULL WHERE round = 1")
    u = harness.client.get("/v1/runs/run-1/dashboard").json()["utilisation"]
    _check_sums(u)
    m = marks[1]
    for row in u["islands"][:2]:  # the two islands that committed round 1
        want = expected(marks[:2], row["hotkey"])  # round 0 alone, as recorded
        assert row["waiting_s"]["audit"] == want["audit"] * PERIOD
        assert row["waiting_s"]["merge"] == want["merge"] * PERIOD
        assert row["waiting_s"]["audit+merge"] == (m.merged - m.selected) * PERIOD
    assert "audit+merge" not in u["islands"][2]["waiting_s"]  # it missed round 1
    assert u["causes"] == ["deadline", "beacon", "audit", "audit+merge", "merge", "open", "missed"]


def test_before_a_finished_round_nothing_is_a_zero(harness: Harness) -> None:
    u = harness.client.get("/v1/runs/run-1/dashboard").json()["utilisation"]
    assert (u["rounds"], u["islands"], u["causes"]) == (0, [], [])
    a = u["all"]
    assert (a["wall_s"], a["busy_s"], a["busy"], a["waiting_s"]) == (None, None, None, {})


def test_fold_and_audit_end() -> None:
    assert fold(0, 10, [("a", 2), ("b", None), ("c", 7), ("d", 10)]) == [
        ("a", 2), ("b+c", 5), ("d", 3)
    ]  # fmt: skip
    assert fold(5, 8, [("a", 3), ("b", 20)]) == [("a", 0), ("b", 3)]  # clamped to the span
    assert fold(0, 4, [("a", None), ("b", None)]) == [("a+b", 4)]
    judged = [("x", 11), ("y", 12), ("x", 30)]  # x re-judged after the window: not counted
    assert audit_end(10, 14, 16, frozenset({"x", "y"}), judged) == 12
    assert audit_end(10, 14, 16, frozenset({"x", "z"}), judged) == 14  # z unjudged: the close
    assert audit_end(10, 14, 16, frozenset(), []) == 10  # nothing audited
    assert audit_end(10, None, 16, frozenset({"z"}), []) is None  # not recorded
    assert audit_end(None, 14, 16, frozenset({"x"}), judged) is None


def test_overlapped_rounds_count_the_ahead_span_as_busy_for_the_next_rounds_committers() -> None:
    clock = RoundClock(round=3, opened=100, closed=104, selected=105, audited=109, merged=111,
                       next_opened=114, roster=frozenset({"a", "b"}), accepted={"a": 102, "b": 103},
                       ahead=frozenset({"a"}))  # fmt: skip
    # a committed the next round: from the selection on it may have trained it
    assert island_round(clock, "a") == [("busy", 2), ("deadline", 2), ("beacon", 1), ("busy", 9)]
    # b did not: it waited for the audits, the merge and the open as without overlap
    assert island_round(clock, "b") == [
        ("busy", 3), ("deadline", 1), ("beacon", 1), ("audit", 4), ("merge", 2), ("open", 3)
    ]  # fmt: skip
    for hotkey in ("a", "b"):
        assert sum(n for _, n in island_round(clock, hotkey)) == 14
