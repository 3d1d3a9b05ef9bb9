"""A devnet that fails leaves its reason and its state behind, never an older report.

The failure here is real and early (a corpus file that does not exist), so the test runs
``run_devnet`` itself in a second, without starting the network.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from rich.console import Console

from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.orchestrator import run_devnet
from hypertrain.devnet.report import clear_reports, write_failed


def test_a_failed_run_writes_a_partial_report_keeps_its_state_and_drops_the_old_one(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "devnet"
    old = state_dir / "report.json"
    state_dir.mkdir()
    for name in ("report.json", "report.md", "report-dashboard.json"):
        (state_dir / name).write_text("an earlier run's")
    cfg = DevnetConfig(
        state_dir=state_dir, cache_dir=tmp_path / "cache", corpus=(tmp_path / "missing.txt",)
    )
    with pytest.raises(DevnetError, match="cannot read corpus file"):
        run_devnet(cfg, Console(file=open(tmp_path / "console.txt", "w")))  # noqa: SIM115
    failed = json.loads(old.read_text())
    assert failed["status"] == "failed" and "missing.txt" in failed["reason"]
    assert failed["logs"] == str(state_dir / "state" / "logs") and failed["rounds"] == []
    assert "FAILED" in old.with_suffix(".md").read_text()
    assert not (state_dir / "report-dashboard.json").exists()  # nothing of the earlier run


def test_a_run_that_fails_after_its_roles_started_keeps_their_logs(tmp_path: Path) -> None:
    """The service's port is taken (an explicit --port stays an error): the beacon had
    started, and its log stays behind without --keep, named by the partial report."""
    state_dir = tmp_path / "devnet"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = DevnetConfig(
            state_dir=state_dir, cache_dir=tmp_path / "cache", port=port,
            preset="tiny", vocab_size=300, seq_len=32,
        )  # fmt: skip
        with pytest.raises(DevnetError):
            run_devnet(cfg, Console(file=open(tmp_path / "console.txt", "w")))  # noqa: SIM115
    failed = json.loads((state_dir / "report.json").read_text())
    assert failed["status"] == "failed" and str(port) in failed["reason"]
    assert (Path(failed["logs"]) / "beacon.log").is_file()


def test_the_partial_report_lists_the_rounds_it_reached(tmp_path: Path) -> None:
    doc = {
        "rounds": [{"round": 0, "phase": "final", "eval_loss": 5.5}, {"round": 1, "phase": "audit"}]
    }
    md = write_failed("DevnetError: island-1 exited", doc, tmp_path / "logs", tmp_path / "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["phase"] for r in report["rounds"]] == ["final", "audit"]
    assert report["rounds"][1]["eval_loss"] is None
    assert "| 0 | final | 5.5 |" in md.read_text()
    clear_reports(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists() and not md.exists()
