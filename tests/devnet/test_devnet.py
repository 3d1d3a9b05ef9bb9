"""End to end: ``hypertrain devnet`` as a new user runs it, and Ctrl-C at any time.

One tiny devnet run (module fixture) feeds the report checks and the exported
model check: the directory loads with transformers offline and its held-out loss
equals the project's own evaluation of the same weights.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TINY = ["--rounds", "2", "--h", "4", "--j", "2", "--preset", "tiny", "--seq-len", "32",
        "--vocab-size", "512", "--port", "0", "--islands", "2"]  # fmt: skip


def _devnet(tmp: Path, *extra: str) -> list[str]:
    dirs = ["--state-dir", str(tmp / "devnet"), "--cache-dir", str(tmp / "cache")]
    return [sys.executable, "-m", "hypertrain.cli", "devnet", *TINY, *dirs, *extra]


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,pgid"], capture_output=True, text=True).stdout
    rows = [tuple(int(x) for x in line.split()) for line in out.splitlines()[1:]]
    found, frontier = set(), {pid}
    while frontier:
        kids = {p for p, pp, _ in rows if pp in frontier} - found
        found |= kids
        frontier = kids
    return sorted(found)


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def devnet_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("devnet")
    report = tmp / "report.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        _devnet(tmp, "--exit-when-done", "--report", str(report), "--timeout-s", "400"),
        capture_output=True, text=True, timeout=480, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(report.read_text())
    doc["_dataset_dir"] = next((tmp / "cache").glob("dataset-*"))
    return doc


@pytest.mark.slow
def test_report_of_a_two_round_devnet(devnet_run: dict[str, Any]) -> None:
    r = devnet_run
    assert [x["round"] for x in r["rounds"]] == [0, 1]
    assert all(x["heldout_loss"] is not None and x["tokens"] > 0 for x in r["rounds"])
    assert all(x["ddp_bytes"] > x["bytes_sent"] > 0 for x in r["rounds"])
    assert r["honeypot"]["caught"] is True
    assert r["ledger_verified"] is True
    assert r["children_left"] == 0
    assert r["bandwidth_saved_vs_ddp"] > 1
    assert "weights" in r["weights"]
    assert Path(r["model_export"], "config.json").is_file()
    assert r["island_layouts"]["applied"] is True  # budgets 1 and 2: the shares differ
    honest = {m["name"]: m["tokens"] for m in r["miners"] if not m["honeypot"]}
    assert honest["island-2"] == 2 * honest["island-1"] > 0


@pytest.mark.slow
def test_exported_model_loads_in_transformers(devnet_run: dict[str, Any]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from hypertrain.devnet.evaluate import heldout_batch

    model = AutoModelForCausalLM.from_pretrained(devnet_run["model_export"], local_files_only=True)
    model = model.float().eval()
    batch = heldout_batch(devnet_run["_dataset_dir"])
    with torch.no_grad():
        logits = model(batch[:, :-1]).logits
        ce = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)
        )
    assert abs(float(ce) - devnet_run["rounds"][-1]["heldout_loss"]) < 1e-4


@pytest.mark.slow
def test_ctrl_c_leaves_no_orphans(tmp_path: Path) -> None:
    proc = subprocess.Popen(_devnet(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while len(seen) < 3:  # beacon, service, relay at least
        assert time.monotonic() < deadline, "the devnet did not start its children"
        seen |= set(_descendants(proc.pid))
        time.sleep(0.1)
    seen |= set(_descendants(proc.pid))  # everything alive at the moment of the interrupt
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30  # a generous bound for the last exits to be reaped
    alive = [p for p in sorted(seen) if _running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if _running(p)]
    assert alive == [], f"orphans left: {alive}"
    assert not (tmp_path / "devnet" / "state").exists()  # removed without --keep
