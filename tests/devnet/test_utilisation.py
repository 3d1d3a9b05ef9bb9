"""Island compute utilisation from the miners' event lines and the rounds' timing."""

from __future__ import annotations

import json

from hypertrain.devnet.island_marks import compute_seconds
from hypertrain.devnet.utilisation import round_walls, utilisation
from hypertrain.devnet.view import summary_rows


def _line(event: str, index: int, ts: float) -> str:
    return json.dumps({"ts": ts, "role": "miner", "event": event, "round": index})


def test_compute_is_round_start_to_upload_and_ignores_noise() -> None:
    lines = [
        "INFO something unrelated",
        "{not json",
        _line("round_start", 0, 100.0),
        _line("step", 0, 101.0),
        _line("uploaded", 0, 109.5),
        _line("uploaded", 1, 120.0),  # no start seen: not counted
        json.dumps({"ts": "late", "event": "round_start", "round": 2}),
    ]
    assert compute_seconds(lines) == {0: 9.5}


def test_walls_run_from_open_to_next_open_or_to_final() -> None:
    rounds = [
        {"round": 0, "phase": "final", "started_unix": 100},
        {"round": 1, "phase": "final", "started_unix": 120},
        {"round": 2, "phase": "audit", "started_unix": 150},
    ]
    assert round_walls(rounds, {0: 119.0, 1: 149.0}) == {0: 20.0, 1: 30.0}
    assert round_walls(rounds[1:2], {1: 135.0}) == {1: 15.0}


def test_utilisation_is_mean_compute_over_wall() -> None:
    walls = {0: 20.0, 1: 30.0}
    compute = {"island-1": {0: 10.0, 1: 12.0}, "island-2": {0: 6.0, 1: 18.0}}
    u = utilisation(walls, compute)
    assert [r["utilisation"] for r in u["per_round"]] == [0.4, 0.5]
    assert u["mean"] == round((8 + 15) / 50, 4) and u["wall_s"] == 25.0
    assert utilisation({}, compute)["mean"] is None


def test_summary_reports_utilisation_and_sample() -> None:
    report = {
        "rounds": [],
        "honeypot": {"name": "island-2", "hotkey": "5" * 48, "strategy": "skip-steps",
                     "caught": True},
        "ledger_verified": True, "miners": [],
        "model_export": "m", "sample": "ROMEO: the",
        "utilisation": {"mean": 0.46, "compute_s": 9.2, "wall_s": 20.0, "per_round": []},
    }  # fmt: skip
    rows = dict(summary_rows(report))
    assert rows["island compute utilisation"] == "46 % (compute 9.2 s of a 20.0 s round, mean)"
    assert rows["sample"] == "ROMEO: the"
