"""End to end: ``hypertrain devnet --scenario rollback`` rolls back a merged cheat.

A lying honeypot auditor (the only active one) passes the honeypot island's cheat, so it
is merged, and lies about island-1, whose ``watch --follow`` disputes and wins. The two
standby jurors' re-audits bar the liar, its verdicts of rounds not final yet are set
aside, their re-audit finds the cheat, and the aggregator rolls the merged round back and
rebases the later ones; the next round opens on the corrected model. Every assertion
reads the report (built from the service's records: ``/faults``, the signed
``merge-correction``s, the round records, the dashboard document), never a log line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

# alone it takes about 2 minutes; beside the rest of the suite on two cores, over 10
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# tiny rounds close in seconds; a short audit window keeps the proof (which waits for the
# cheat's round to settle) within a few rounds, so later rounds open on the corrected model
ARGS = ["--scenario", "rollback", "--rounds", "10", "--h", "4", "--j", "2", "--preset", "tiny",
        "--seq-len", "32", "--vocab-size", "512", "--port", "0", "--islands", "2",
        "--audit-window-s", "15", "--honeypot", "wrong-samples"]  # fmt: skip


@pytest.fixture(scope="module", params=["sequential", "overlapped"])
def rollback_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The scenario's report, with rounds in sequence and overlapped (``--overlap``: the
    islands train each round while the one before is audited, disputed and rolled back)."""
    tmp = tmp_path_factory.mktemp("rollback")
    overlap = ["--overlap"] if request.param == "overlapped" else []
    report = tmp / "report.json"
    dirs = ["--state-dir", str(tmp / "devnet"), "--cache-dir", str(tmp / "cache")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "hypertrain.cli", "devnet", *ARGS, *overlap, *dirs,
         "--exit-when-done", "--report", str(report), "--timeout-s", "1500"],
        capture_output=True, text=True, timeout=1600, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(report.read_text())
    doc["_dashboard"] = json.loads((tmp / "report-dashboard.json").read_text())
    doc["_markdown"] = (tmp / "report.md").read_text()
    doc["_overlap"] = bool(overlap)
    return doc


def test_the_honeypots_merged_round_is_rolled_back_and_islands_move_on(
    rollback_run: dict[str, Any],
) -> None:
    r = rollback_run
    assert r["scenario"] == "rollback" and r["children_left"] == 0
    hp = r["honeypot"]
    assert hp["honest_rounds"] == 1  # it cheats from round 1, which the liar passes
    [row] = [x for x in r["rollbacks"] if x["round"] == 1]
    assert (row["hotkey"], row["island"]) == (hp["hotkey"], hp["name"])
    assert row["corrected"] is True and row["depth"] >= 1
    assert row["corrected_rounds"] == list(range(1, 1 + row["depth"] + 1))
    assert row["corrected_model_sha256"] and row["head_model_sha256"]
    # a round opened after the rebase on the corrected head: the islands moved to it
    assert row["resumed_round"] is not None and row["resumed_round"] > row["corrected_rounds"][-1]
    assert r["ledger_verified"] is True
    # the summary's rollbacks row, as the report's Markdown twin holds it
    line = f"| rollbacks | round 1 {hp['name']} {hp['hotkey'][:8]}… (depth {row['depth']}):"
    assert line in r["_markdown"], r["_markdown"]
    assert f"islands on it from round {row['resumed_round']}" in r["_markdown"]


def test_the_liar_lost_its_dispute_to_the_island_it_lied_about(
    rollback_run: dict[str, Any],
) -> None:
    dash = rollback_run["_dashboard"]
    island_1 = next(m["hotkey"] for m in rollback_run["miners"] if m["name"] == "island-1")
    games = [d for d in dash["disputes"] if d["hotkey"] == island_1 and d["round"] == 1]
    assert games and games[0]["outcome"] == "overturned", games
    rows = {(x["role"], x["strategy"]): x for x in dash["honeypots"]["rows"]}
    assert rows[("auditor", "lying")]["disputes_lost"] >= 1
    assert rows[("island", "wrong-samples")]["caught"] >= 1


def test_overlapped_islands_trained_ahead(
    rollback_run: dict[str, Any],
) -> None:
    """Under ``--overlap`` the honest islands adopted rounds they trained ahead (audited
    from the derived overlapped start like every round: the other tests of this module
    hold the scenario's outcome to the same checks either way); in sequence none did."""
    islands = rollback_run["utilisation"]["islands"]
    honest = [u for u in islands.values() if u["honest"]]
    adopted = [u["adopted"] for u in honest]
    assert all(n >= 1 for n in adopted) if rollback_run["_overlap"] else not any(adopted)
    # Not asserted here: that no honest island is burned. The scenario's 15 s audit window
    # gives an island 7.5 s to upload a selected checkpoint; beside the whole suite on two
    # cores an honest island once missed it and was proven unverifiable (docs/threats.md,
    # "Liveness": open).
