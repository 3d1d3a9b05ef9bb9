"""The dashboard's added panels: curve summary, round stations, island hardware."""

from __future__ import annotations

from hypertrain.api.models import Phase, RoundSummary, VerdictCounts
from hypertrain.challenge.dashboard.models import CurvePoint
from hypertrain.challenge.dashboard.panels import STATIONS, curve_summary, stations
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import run_rounds


def _curve(*losses: float | None) -> list[CurvePoint]:
    return [
        CurvePoint(round=i, heldout_loss=v, train_loss_self_reported=None)
        for i, v in enumerate(losses)
    ]


def _at(phase: Phase, commits: int) -> RoundSummary:
    """Round 2 in ``phase`` with ``commits`` commits (the other fields do not matter)."""
    return RoundSummary(
        round=2, phase=phase, open_beacon_round=1, commit_deadline_round=3,
        selection_beacon_round=None, audit_close_round=None, dispute_deadline_round=None,
        start_model_sha256=None, new_model_sha256=None, commits=commits, tokens=0,
        update_bytes=0, train_loss=None, eval_loss=None, audits=0,
        verdicts=VerdictCounts(match=0, mismatch=0), disputes=0, settled_epoch=None,
    )  # fmt: skip


def test_curve_summary_finds_drop_extremes_and_spike() -> None:
    summary = curve_summary(_curve(6.0, 5.0, 5.4, None, 4.5), total_rounds=6)
    assert summary is not None
    s = summary.model_dump()
    assert s["start"] == {"round": 0, "loss": 6.0} and s["last"] == {"round": 4, "loss": 4.5}
    assert s["drop"] == 1.5 and s["drop_pct"] == 0.25
    assert s["lowest"] == {"round": 4, "loss": 4.5}
    assert s["highest_after_first"] == {"round": 2, "loss": 5.4}
    assert s["spike"]["round"] == 2 and abs(s["spike"]["rise"] - 0.4) < 1e-9
    assert (s["synced_rounds"], s["rounds"]) == (4, 6)
    assert curve_summary(_curve(None), 1) is None
    falling = curve_summary(_curve(3.0, 2.0), 2)
    assert falling is not None and falling.spike is None


def test_stations_light_the_current_phase() -> None:
    assert stations(None).current is None
    assert [s.id for s in stations(None).stations] == [s[0] for s in STATIONS]
    assert stations(_at("train", 0)).current == "train"
    assert stations(_at("train", 1)).current == "commit"
    assert stations(_at("final", 3)).current == "settle"
    assert stations(_at("final", 3)).round == 2


def test_dashboard_document_carries_the_new_panels(harness: Harness) -> None:
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    assert d["model"]["spec"]["num_layers"] == d["model"]["layers"]
    assert d["round_stations"]["current"] == "settle" and d["round_stations"]["round"] == 1
    assert d["curve_summary"]["lowest"] == {"round": 1, "loss": 4.0}
    for isl in d["islands"]:
        device = {"index": 0, "name": "test", "class": isl["device_class"]}
        assert isl["nodes"] == [{"node": "0", "devices": [device]}]
        assert isl["device_model"] == "test" and isl["region"] is None
        assert isl["last_sync_unix"] is not None and isl["name"] == f"island-{isl['uid']}"


def test_region_comes_from_the_join_request_and_is_checked(harness: Harness) -> None:
    from tests.challenge.helpers import join_body, signed

    h = harness
    body = {**join_body(), "region": "EU West"}
    assert h.client.post("/v1/join", json=signed(h.miners[0], "join", body)).status_code == 200
    liar = {**join_body(), "region": "<script>alert(1)</script>"}
    bad = h.client.post("/v1/join", json=signed(h.miners[1], "join", liar))
    assert bad.status_code == 400  # refused, and nothing of it is stored
    d = h.client.get("/v1/runs/run-1/dashboard").json()
    assert [i["region"] for i in d["islands"]] == ["EU West"]
