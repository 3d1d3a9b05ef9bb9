"""End to end: ``hypertrain devnet`` as a new user runs it, and Ctrl-C at any time.

One tiny devnet run (module fixture) feeds the report checks and the exported
model check: the directory loads with transformers offline and its held-out loss
equals the project's own evaluation of the same weights.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hypertrain.challenge import dashboard as dashboard_pkg
from hypertrain.protocol.traffic import ratio_words
from tests.challenge.test_dashboard_browser import (
    ARGS,
    check_figures_agree,
    check_honeypot_rows,
    check_traffic,
    require_browser,
)

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
        # with a warm start (the recipe has none; the other devnet tests run without one)
        _devnet(tmp, "--exit-when-done", "--report", str(report), "--timeout-s", "400",
                "--warm-start-percent", "1"),
        capture_output=True, text=True, timeout=480, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(report.read_text())
    doc["_dataset_dir"] = next((tmp / "cache").glob("dataset-*"))
    doc["_dashboard"] = json.loads((tmp / "report-dashboard.json").read_text())
    return doc


@pytest.mark.slow
def test_report_of_a_two_round_devnet(devnet_run: dict[str, Any]) -> None:
    r = devnet_run
    assert [x["round"] for x in r["rounds"]] == [0, 1]
    assert all(x["heldout_loss"] is not None and x["tokens"] > 0 for x in r["rounds"])
    assert all(x["data_parallel_bytes"] > x["bytes_sent"] > 0 for x in r["rounds"])
    hp = r["honeypot"]
    assert hp["caught"] is True
    # honest in round 0 (the default honest rounds, capped at R - 1), caught in round 1:
    # the escrow it built is burned (nothing was paid before) and its weight is 0
    assert hp["honest_rounds"] == 1 and hp["first_fault_round"] == 1
    assert hp["burned"] == hp["escrow_before_fault"] > 0 and hp["weight_after"] == 0
    assert next(m for m in r["miners"] if m["honeypot"])["burned"] == hp["burned"]
    assert r["ledger_verified"] is True
    # every honest audit matched under the recipe's `carry` (round 1's start state comes
    # from each island's round-0 final checkpoint, uploaded when audited)
    assert all(m["burned"] == 0 for m in r["miners"] if not m["honeypot"])
    # read from the service's /faults: one honest auditor judges in the audit window and
    # merges are strict, so the cheat is excluded before its merge: nothing to roll back
    assert r["rollbacks"] == []
    assert r["children_left"] == 0
    t = r["traffic"]
    # both rounds are probation rounds (every island audited), so the ratio may fall either
    # side of 1x: the words must be the ratio's, and the sum the rounds' bytes
    a = t["all"]
    assert a["rounds"] == 2 and a["words"] == ratio_words(
        a["data_parallel_bytes"], a["honest_bytes"]
    )
    assert a["data_parallel_bytes"] == sum(x["data_parallel_bytes"] for x in r["rounds"])
    # a warm start (--warm-start-percent 1: one step), before round 0, on every island's
    # samples of a step together; its data-parallel bytes are named, not hidden
    w = r["warm_start"]
    assert (w["steps"], w["devices"]) == (1, 3) and w["data_parallel_bytes"] > 0
    assert w["samples_per_step"] == 2 * (1 + 2 + 1)  # MICRO_BATCH_SIZE x the budgets
    assert r["_dashboard"]["glance"]["rounds_total"] == 2  # the warm start is not a round
    assert "weights" in r["weights"]
    assert Path(r["model_export"], "config.json").is_file()
    assert Path(r["model_export"], "tokenizer.json").is_file()  # exported with its tokenizer
    assert r["sample"].startswith("ROMEO:")  # generated by transformers from the export
    util = r["utilisation"]
    assert 0 < util["mean"] <= 1 and [x["round"] for x in util["per_round"]] == [0, 1]
    # data-parallel on the same tokens, trained beside the network, in the summary
    base = r["baseline"]
    assert base["error"] is None and base["rounds"] == 2 and len(base["heldout_loss"]) == 2
    assert base["network_heldout_loss"] == r["rounds"][-1]["heldout_loss"]
    assert base["gap_pct"] == pytest.approx(
        100 * (base["network_heldout_loss"] / base["final_heldout_loss"] - 1)
    )
    posted = r["_dashboard"]["baseline"]  # posted with the admin token: the chart draws it
    assert posted["heldout_loss"] == base["heldout_loss"]
    assert posted["gap"]["gap_pct"] == pytest.approx(base["gap_pct"])
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


def _static_service(doc: dict[str, Any]) -> http.server.ThreadingHTTPServer:
    """The dashboard's files and one stored dashboard document, as the service serves them."""
    assets = Path(dashboard_pkg.__file__).parent
    run = json.dumps([{"run_id": doc["run_id"]}]).encode()
    body = json.dumps(doc).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            name = path.removeprefix("/dashboard/") or "index.html"
            if path == f"/v1/runs/{doc['run_id']}/dashboard":
                self._send(body, "application/json")
            elif path == "/v1/runs":
                self._send(run, "application/json")
            elif path.startswith("/dashboard/") and (assets / name).is_file() and "/" not in name:
                kind = {"js": "text/javascript", "css": "text/css"}.get(name.rsplit(".")[-1])
                self._send((assets / name).read_bytes(), kind or "text/html")
            else:
                self.send_error(404)

        def _send(self, data: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.slow
def test_the_dashboard_agrees_with_itself_on_the_devnets_document(
    devnet_run: dict[str, Any],
) -> None:
    """The devnet's final document in Chromium: rounds, islands and traffic agree across
    panels, and the honeypot panel is filled by the devnet's commit and reveal."""
    from playwright.sync_api import expect, sync_playwright

    executable = require_browser()
    doc = devnet_run["_dashboard"]
    server = _static_service(doc)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(executable), args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/dashboard/")
            expect(page.locator("#conn")).to_have_text(f"Connected: run {doc['run_id']}")
            check_figures_agree(page, doc)
            assert doc["glance"]["rounds_done"] == doc["glance"]["rounds_total"] == 2
            expect(page.locator("#glance-tiles .tile.status")).to_contain_text("finished")
            check_honeypot_rows(page, doc["honeypots"])
            assert any(r["caught"] for r in doc["honeypots"]["rows"]), doc["honeypots"]
            check_traffic(page, doc["traffic"])
            assert errors == []
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


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
