"""Whole-run utilisation and the waits by cause, from synthetic event lines and rounds.

The timeline (beacon period 1 s; round 0 opens at beacon round 10 = t 1000):

    island-a  seen 1000.5  fetch 1000.8  start 1002    uploaded 1010    committed 1010.3
    island-b  seen 1000.6  fetch 1001    start 1002.5  uploaded 1009    committed 1010.8
    round 0   commits close at the last commit (1010.8), selection beacon 21 (t 1011),
              last verdict 1014, merge received in beacon 26 (t 1016)
    round 1   opens at beacon 28 (t 1018); island-a seen 1018.4, fetch 1018.6, start 1019,
              uploaded 1027; island-b seen 1018.5, fetch 1018.7, start 1019.5, then crashes
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hypertrain.devnet.island_marks import island_rounds
from hypertrain.devnet.report import markdown, utilisation_table
from hypertrain.devnet.utilisation import (
    island_segments,
    round_clock,
    run_utilisation,
    service_clocks,
    steady_from,
    whole_run,
)
from hypertrain.devnet.view import summary_rows, utilisation_rows


def _line(event: str, index: int, ts: float, role: str = "miner") -> str:
    return json.dumps({"ts": ts, "role": role, "event": event, "round": index})


def _island(*events: tuple[str, int, float]) -> list[str]:
    return ["INFO torch imported", *(_line(e, i, t) for e, i, t in events)]


A = _island(
    ("round_seen", 0, 1000.5), ("start_model_fetch", 0, 1000.8), ("round_start", 0, 1002.0),
    ("step", 0, 1005.0), ("uploaded", 0, 1010.0), ("committed", 0, 1010.3),
    ("round_seen", 1, 1018.4), ("start_model_fetch", 1, 1018.6), ("round_start", 1, 1019.0),
    ("uploaded", 1, 1027.0), ("committed", 1, 1027.2),
)  # fmt: skip
B_CRASHED = _island(
    ("round_seen", 0, 1000.6), ("start_model_fetch", 0, 1001.0), ("round_start", 0, 1002.5),
    ("uploaded", 0, 1009.0), ("committed", 0, 1010.8),
    ("round_seen", 1, 1018.5), ("start_model_fetch", 1, 1018.7), ("round_start", 1, 1019.5),
)  # fmt: skip
FINAL_AT = {0: 1017.0, 1: 1030.0}  # when the devnet saw each round final
AUDITOR = [_line("verdict", 0, 1013.0, "auditor"), _line("verdict", 0, 1014.0, "auditor"),
           _line("verdict", 0, 1099.0, "miner")]  # fmt: skip  # a watcher's line: not timed


def _round(index: int, opened_beacon: int, **fields: Any) -> dict[str, Any]:
    base = {
        "round": index, "phase": "final", "open_beacon_round": opened_beacon,
        "started_unix": 1000 + (opened_beacon - 10), "commit_deadline_round": opened_beacon + 30,
        "selection_beacon_round": None, "audit_close_round": None, "audits": 2,
        "compute_s": None, "sync_s": None, "probation": False,
    }  # fmt: skip
    return {**base, **fields}


def _doc(audits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "beacon": {"genesis_unix": 991, "period_s": 1},
        "rounds": [
            _round(0, 10, selection_beacon_round=21, audit_close_round=31, compute_s=10, sync_s=6),
            _round(1, 28, selection_beacon_round=38, audit_close_round=48, compute_s=9, sync_s=2),
        ],
        "audits": audits or [],
    }


def _invariant(u: dict[str, Any]) -> None:
    assert u["compute_s"] + sum(u["waiting_s"].values()) == pytest.approx(u["wall_s"], abs=1e-6)


def test_every_second_between_upload_and_next_start_has_a_cause() -> None:
    both = {"island-a": A, "island-b": B_CRASHED}  # island-b's commit is the round's last
    u = whole_run(_doc(), both, AUDITOR)["islands"]["island-a"]
    assert u["wall_s"] == 25.0 and u["compute_s"] == 16.0 and u["rounds"] == 2
    assert u["utilisation"] == 0.64 and u["complete"] and u["notes"] == []
    assert u["waiting_s"] == pytest.approx({
        "deadline": 0.8, "beacon": 0.2, "audit": 3.0, "merge": 2.0, "open": 2.0,
        "notice": 0.4, "prepare": 0.2, "download": 0.4,
    })  # fmt: skip
    assert list(u["waiting_s"]) == ["deadline", "beacon", "audit", "merge", "open", "notice",
                                    "prepare", "download"]  # fmt: skip
    _invariant(u)


def test_an_island_that_crashed_mid_round_is_partial_and_still_adds_up() -> None:
    u = whole_run(_doc(), {"island-b": B_CRASHED}, AUDITOR, run_end=1030.0)["islands"]["island-b"]
    assert not u["complete"]
    assert u["notes"] == ["round 1: started, no upload (crashed, or the run ended first)"]
    assert u["rounds"] == 1 and u["compute_s"] == 6.5
    assert u["wall_s"] == 27.5  # first round_start 1002.5 to the run's end 1030
    assert u["waiting_s"]["unfinished"] == pytest.approx(10.5)
    assert u["waiting_s"]["deadline"] == pytest.approx(1.8)
    _invariant(u)
    # without the run's end its wall stops at its last mark (the round_start it began)
    alone = whole_run(_doc(), {"island-b": B_CRASHED}, AUDITOR)["islands"]["island-b"]
    assert alone["waiting_s"]["unfinished"] == 0.0 and alone["wall_s"] == 17.0
    _invariant(alone)


def test_a_boundary_not_recorded_joins_its_cause_to_the_next_never_a_silent_zero() -> None:
    old_miner = [line for line in A if "round_seen" not in line and "start_model_fetch" not in line]
    lines = {"island-a": old_miner, "island-b": B_CRASHED}
    u = whole_run(_doc(), lines)["islands"]["island-a"]  # and no auditor lines
    assert u["waiting_s"] == pytest.approx({
        "deadline": 0.8, "beacon": 0.2, "audit+merge": 5.0, "open": 2.0,
        "notice+prepare+download": 1.0,
    })  # fmt: skip
    assert "audit" not in u["waiting_s"] and "download" not in u["waiting_s"]
    _invariant(u)


def test_a_round_without_audits_closes_its_audit_phase_at_selection() -> None:
    doc = _doc()
    doc["rounds"][0]["audits"] = 0
    clock = service_clocks(doc, {"island-a": A}, [])[0]
    assert clock.audited == clock.selected == 1011.0


def test_commits_close_at_the_deadline_when_an_island_never_committed() -> None:
    r = _round(0, 10, commit_deadline_round=20, selection_beacon_round=21)
    clock = round_clock(r, 1.0, last_commit=1004.2, verdicts=[])
    assert clock.commits_closed == clock.selected == 1011.0  # no beacon wait: due at once
    assert clock.audited is None  # no verdict seen: the audit is not timed
    early = round_clock(r, 1.0, last_commit=1010.4, verdicts=[])  # committed in beacon 20
    assert early.commits_closed == 1010.4


def test_audits_end_at_the_last_verdict_inside_the_window_and_before_the_merge() -> None:
    r = _round(0, 10, selection_beacon_round=21, audit_close_round=25, compute_s=10, sync_s=8)
    window = round_clock(r, 1.0, 1010.4, verdicts=[1030.0])
    assert window.audited == 1015.0  # the audit window closed before the only verdict
    late = round_clock({**r, "audit_close_round": 40}, 1.0, 1010.4, verdicts=[1013.5, 1050.0])
    assert late.merged == 1018.0 and late.audited == 1013.5  # a re-audit after the merge


def test_a_restart_within_a_round_and_a_missed_round() -> None:
    lines = _island(
        ("round_start", 0, 1002.0), ("round_start", 0, 1004.0),  # restarted, resumed
        ("uploaded", 0, 1010.0),
        ("round_seen", 2, 1040.3), ("start_model_fetch", 2, 1040.5), ("round_start", 2, 1041.0),
        ("uploaded", 2, 1049.0),
    )  # fmt: skip
    doc = _doc()
    doc["rounds"].append(_round(2, 50, selection_beacon_round=60, compute_s=9, sync_s=3))
    u = whole_run(doc, {"island-c": lines}, AUDITOR)["islands"]["island-c"]
    assert u["compute_s"] == 14.0 and u["waiting_s"]["unfinished"] == 2.0
    assert u["waiting_s"]["missed"] == pytest.approx(22.0)  # round 1 opened 1018, round 2 1040
    assert u["notes"] == ["round 0: restarted, 2.0 s lost", "rounds not started: 1"]
    _invariant(u)


def test_segments_cover_the_wall_time_in_every_scenario() -> None:
    doc = _doc()
    clocks = service_clocks(doc, {"a": A, "b": B_CRASHED}, AUDITOR)
    for lines, end in ((A, None), (B_CRASHED, 1030.0), (A[:4], 1030.0), (A[:7], None)):
        marks = island_rounds(lines)
        segments = island_segments(marks, clocks, end)
        first = min(m.start for m in marks.values())
        last = max(m.uploaded or (end if end is not None else m.start) for m in marks.values())
        assert sum(s.seconds for s in segments) == pytest.approx(last - first)
        assert all(s.seconds >= 0 for s in segments)


def test_run_figures_count_honest_islands_and_steady_rounds_follow_probation() -> None:
    audits = [
        {"round": 0, "hotkey": "5A", "probation": True},
        {"round": 0, "hotkey": "5H", "probation": True},
        {"round": 1, "hotkey": "5H", "probation": True},  # the caught honeypot: forced
    ]
    doc = _doc(audits)
    honeypot = list(A)
    lines, hotkeys = {"island-a": A, "island-h": honeypot}, {"island-a": "5A", "island-h": "5H"}
    out = whole_run(doc, lines, AUDITOR, hotkeys=hotkeys, honest={"island-a"})
    assert out["run"]["islands"] == 1 and out["run"]["utilisation"] == 0.64
    assert out["run"]["compute_s_per_round"] == 8.0 and out["run"]["wall_s_per_round"] == 12.5
    assert sum(out["run"]["waiting_share"].values()) == pytest.approx(0.36, abs=1e-3)
    assert not out["islands"]["island-h"]["honest"]
    steady = out["steady"]
    assert steady["from_round"] == 1 and steady["basis"] == "after probation"
    assert steady["rounds"] == 1 and steady["compute_s"] == 8.0 and steady["wall_s"] == 8.0
    assert steady_from([], {"5A"}) == (1, "probation not visible")
    assert steady_from([{"round": 3, "hotkey": "5A", "probation": False}], {"5A"})[0] == 0


def test_run_utilisation_keeps_the_per_round_keys() -> None:
    logs = {"island-a": A, "island-b": B_CRASHED, "auditor": AUDITOR, "relay": ["up"]}
    hotkeys = {"island-a": "5A", "island-b": "5B"}
    u = run_utilisation(_doc(), FINAL_AT, logs, hotkeys=hotkeys, honest={"island-a"})
    assert [r["round"] for r in u["per_round"]] == [0, 1]
    assert u["per_round"][0] == {"round": 0, "wall_s": 18.0, "compute_s": 7.25,
                                 "utilisation": round(7.25 / 18, 4)}  # fmt: skip
    assert set(u) >= {"mean", "compute_s", "wall_s", "islands", "run", "steady"}
    assert u["islands"]["island-b"]["wall_s"] == 27.5  # the run ends when round 1 was final
    assert u["islands"]["island-a"]["waiting_s"]["audit"] == 3.0  # the auditor's lines


def test_summary_and_markdown_show_the_whole_run_and_partial_islands() -> None:
    logs = {"island-a": A, "island-b": B_CRASHED, "auditor": AUDITOR}
    hotkeys = {"island-a": "5A", "island-b": "5B"}
    u = run_utilisation(_doc(), FINAL_AT, logs, hotkeys=hotkeys, honest=set(hotkeys))
    rows = dict(utilisation_rows(u))
    assert rows["island utilisation, whole run (2 honest islands)"] == (
        "43 % of wall time (compute 7.5 s of 17.5 s per round); waiting: deadline 5.0 %,"
        " beacon 0.8 %, audit 11 %, merge 7.6 %, open 7.6 %, notice 1.7 %, prepare 0.8 %,"
        " download 2.3 %, unfinished 20 %"
    )
    assert not any("rounds >= 1" in k for k in rows)  # one round each: no whole round
    steady = {"utilisation": 0.5, "rounds": 4, "islands": 2, "from_round": 2,
              "basis": "after probation", "compute_s_per_round": 5.0,
              "wall_s_per_round": 10.0, "waiting_share": {"audit+merge": 0.5}}  # fmt: skip
    assert utilisation_rows({"steady": steady}) == [(
        "island utilisation, rounds >= 2 (after probation)",
        "50 % of wall time (compute 5.0 s of 10.0 s per round); waiting: audit+merge 50 %",
    )]  # fmt: skip
    assert rows["utilisation of island-b: partial"].startswith("round 1: started, no upload")
    table = "\n".join(utilisation_table(u))
    assert "| island-a | 2 | 16.0 | 25.0 | 64.0 % |" in table
    report = {
        "rounds": [], "honeypot": {"name": "h", "hotkey": "5" * 48, "strategy": "s",
                                   "caught": True},
        "ledger_verified": True, "miners": [], "model_export": "m", "utilisation": u,
        "children_left": 0,
    }  # fmt: skip
    assert [k for k, _ in summary_rows(report)][2] == "island compute utilisation"
    assert "## Utilisation (whole run)" in markdown(report)
    assert utilisation_rows({"per_round": [], "mean": None}) == []
