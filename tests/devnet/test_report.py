"""The run report, its Markdown twin and the plain per-round line, from a dashboard document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.keys import Secrets, generate
from hypertrain.devnet.report import build_report, write_report
from hypertrain.devnet.view import round_line, summary_rows


def _round(index: int, loss: float | None, phase: str = "final") -> dict[str, Any]:
    return {
        "round": index, "phase": phase, "eval_loss": loss, "train_loss": 6.0, "tokens": 1000,
        "bytes_sent": 100, "ddp_bytes": 3000, "audits": 4, "compute_s": 5, "sync_s": 20,
        "verdicts": {"match": 3, "mismatch": 1},
    }  # fmt: skip


def _doc(sec: Secrets) -> dict[str, Any]:
    honeypot = sec.islands[-1].ss58
    islands = [
        {"hotkey": m.ss58, "status": "faulted" if m.ss58 == honeypot else "probation",
         "tokens": 1000, "escrow": 0 if m.ss58 == honeypot else 500, "vested": 0, "paid": 7,
         "burned": 0}
        for m in sec.islands
    ]  # fmt: skip
    return {
        "run_id": "devnet",
        "model": {"preset": "tiny"},
        "rounds": [_round(0, 6.5), _round(1, 6.1), _round(2, None, phase="audit")],
        "islands": islands,
        "audits": [{"hotkey": honeypot, "fault": True, "round": 0}],
    }


def test_report_uses_the_services_losses_and_finds_the_honeypot(tmp_path: Path) -> None:
    sec = generate(tmp_path / "s", islands=3)
    weights = {"weights": {sec.islands[0].ss58: 0.5}}
    report = build_report(
        _doc(sec), sec, strategy="skip-steps", weights=weights, ledger_verified=True,
        model_export="m", children_left=0, layouts=DevnetConfig().island_layouts(),
    )  # fmt: skip
    assert [(r["round"], r["heldout_loss"]) for r in report["rounds"]] == [(0, 6.5), (1, 6.1)]
    assert report["honeypot"] == {
        "name": "island-4", "hotkey": sec.islands[-1].ss58, "strategy": "skip-steps",
        "caught": True,
    }  # fmt: skip
    assert [m["honeypot"] for m in report["miners"]] == [False, False, False, True]
    assert report["bandwidth_saved_vs_ddp"] == 30.0
    assert report["island_layouts"]["applied"] is False
    assert report["island_layouts"]["planned"]["island-3"]["micro_batches"] == 3
    assert report["miners"][0]["weight"] == 0.5 and report["miners"][0]["paid"] == 7
    rows = dict(summary_rows(report))
    assert rows[f"miner island-1 {sec.islands[0].ss58[:6]}…{sec.islands[0].ss58[-4:]}"].endswith(
        "paid 7  burned 0  weight 1.000"
    )
    assert rows["final held-out loss"].startswith(
        "6.1000 (after the first round: 6.5000, drop 0.4000"
    )
    md = write_report(report, tmp_path / "out" / "report.json")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["rounds"][1]["round"] == 1
    assert "| 1 | 6.1000 | 1,000 | 100 | 3,000 | 4 | 1 |" in md.read_text()


def test_round_line_reads_as_a_sentence() -> None:
    line = round_line(_round(1, 6.1234), 4)
    assert line.startswith("round 1 done (2/4): held-out loss 6.1234, 1,000 tokens")
    assert line.endswith("audits 4: 3 match, 1 mismatch")
