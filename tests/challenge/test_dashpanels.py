"""The dashboard's added panels: curve summary, round stations, island hardware, the
outer optimizer in words, and the honeypot list's optional first cheating round."""

from __future__ import annotations

import pytest

from hypertrain.api.models import Phase, RoundSummary, VerdictCounts
from hypertrain.challenge.dashboard.document import outer_card
from hypertrain.challenge.dashboard.models import CurvePoint
from hypertrain.challenge.dashboard.panels import STATIONS, curve_summary, stations
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
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
    summary = curve_summary(_curve(6.0, 5.0, 5.4, None, 4.5), rounds_done=4, rounds_total=6)
    assert summary is not None
    s = summary.model_dump()
    assert s["start"] == {"round": 0, "loss": 6.0} and s["last"] == {"round": 4, "loss": 4.5}
    assert s["drop"] == 1.5 and s["drop_pct"] == 0.25
    assert s["lowest"] == {"round": 4, "loss": 4.5}
    assert s["highest_after_first"] == {"round": 2, "loss": 5.4}
    assert s["spike"]["round"] == 2 and abs(s["spike"]["rise"] - 0.4) < 1e-9
    assert (s["rounds_done"], s["rounds_total"]) == (4, 6)
    assert curve_summary(_curve(None), 0, 1) is None
    falling = curve_summary(_curve(3.0, 2.0), 2, 2)
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


def test_outer_optimizer_in_words() -> None:
    """lr 1 without momentum is plain averaging (the README's words), whatever its name."""
    assert outer_card(True, 1.0, 0.0).words == "plain averaging (outer lr 1, no momentum)"
    assert outer_card(False, 1.0, 0.0).words.startswith("plain averaging")
    assert outer_card(True, 0.7, 0.9).words == "Nesterov momentum, lr 0.7, momentum 0.9"
    assert outer_card(False, 0.5, 0.9).words == "SGD with momentum, lr 0.5, momentum 0.9"
    assert outer_card(True, 0.5, 0.0).words == "SGD, lr 0.5, no momentum"


def test_a_list_entry_without_a_first_cheating_round_hashes_as_before() -> None:
    """``cheats_from_round`` is left out of the commitment when absent: lists committed
    before the field existed keep their hash; a stated round changes it."""
    entry = {"hotkey": "5" * 48, "role": "island", "strategy": "skip-steps"}
    old = HoneypotList(salt="a" * 64, entries=[HoneypotEntry(**entry)])
    assert commitment(old) == "e2e7d3adc9dccc25c54a471dd36a04a0f924dd5414276eae04e214ae8bf1dac8"
    stated = HoneypotList(salt="a" * 64, entries=[HoneypotEntry(**entry, cheats_from_round=2)])
    assert commitment(stated) != commitment(old)
    assert HoneypotList.model_validate_json(stated.model_dump_json()) == stated
    with pytest.raises(ValueError, match="cheats_from_round"):
        HoneypotEntry(hotkey="5" * 48, role="island", strategy="honest", cheats_from_round=1)
