"""Island utilisation with and without overlapped rounds, on the product's own network.

Each cell is one ``hypertrain devnet`` run to its report (the product's processes: beacon,
service, relay, auditor, witness, aggregator, islands and the honeypot), in sequence
(``round.overlap`` off) and overlapped (``--overlap``: islands train round ``r + 1`` while
round ``r`` is audited and merged), at the recipe's H and at a larger H where compute
outweighs the chain's own work. The figure of merit is the whole-run utilisation after
probation (``devnet.utilisation``: an island's compute over its wall time, every wait by
cause) and the overlapped run's over the sequential one's at the same H; held-out loss
against data-parallel is recorded beside it (a short run: the start of training, where the
overlap costs most; its long-run cost is ``longrun-overlap-warm10.json``). The machine's load is
recorded before and after each cell: the islands, the auditor and the rest share its cores.

    .venv/bin/python benchmarks/bench_overlap.py [--rounds 10] [--big-h 150 --big-rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import write_result
from longrun_report import commit

ROOT = Path(__file__).resolve().parent.parent


def load() -> float:
    """The one-minute load average."""
    return os.getloadavg()[0]


def devnet(args: list[str], tmp: Path) -> dict[str, Any]:
    """One devnet run to its report (the product's CLI, as an operator runs it)."""
    report = tmp / "report.json"
    before, started = load(), time.time()
    cmd = [sys.executable, "-m", "hypertrain.cli", "devnet", *args, "--port", "0",
           "--state-dir", str(tmp / "devnet"), "--cache-dir", str(ROOT / ".cache" / "devnet"),
           "--exit-when-done", "--report", str(report), "--timeout-s", "5400"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"devnet {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    doc: dict[str, Any] = json.loads(report.read_text())
    return {"doc": doc, "load_before": round(before, 2), "load_after": round(load(), 2),
            "wall_s": round(time.time() - started, 1)}  # fmt: skip


def cell(name: str, args: list[str]) -> dict[str, Any]:
    """The figures of one run: utilisation (whole run, after probation), waits, quality."""
    with tempfile.TemporaryDirectory(prefix=f"overlap-{name}-") as tmp:
        run = devnet(args, Path(tmp))
    doc = run.pop("doc")
    util, base = doc["utilisation"], doc["baseline"]
    steady = util["steady"]
    adopted = [u["adopted"] for u in util["islands"].values() if u["honest"]]
    return {
        "args": " ".join(args),
        "utilisation_run": util["run"]["utilisation"],
        "utilisation_steady": steady["utilisation"],
        "steady_from_round": steady["from_round"],
        "compute_s_per_round": steady["compute_s_per_round"],
        "wall_s_per_round": steady["wall_s_per_round"],
        "waiting_share_steady": steady["waiting_share"],
        "rounds_adopted_per_island": adopted,
        "heldout_gap_pct": round(base["gap_pct"], 3) if base.get("gap_pct") is not None else None,
        **run,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="rounds at the recipe's H")
    p.add_argument("--big-h", type=int, default=150, help="the larger H (0: skip it)")
    p.add_argument("--big-rounds", type=int, default=6, help="rounds at the larger H")
    args = p.parse_args()
    plans = [("h15", ["--rounds", str(args.rounds)])]
    if args.big_h:
        plans.append((f"h{args.big_h}", ["--rounds", str(args.big_rounds), "--h", str(args.big_h)]))
    values: dict[str, Any] = {"commit": commit()}
    for tag, plan in plans:
        seq = cell(f"{tag}-seq", plan)
        ovl = cell(f"{tag}-ovl", [*plan, "--overlap"])
        values[f"{tag}_sequential"] = seq
        values[f"{tag}_overlapped"] = ovl
        if seq["utilisation_steady"] and ovl["utilisation_steady"] is not None:
            ratio = ovl["utilisation_steady"] / seq["utilisation_steady"]
            values[f"{tag}_utilisation_overlapped_over_sequential"] = round(ratio, 3)
    notes = (
        "Each cell is one devnet run (3 honest islands and the honeypot, the recipe's"
        " defaults otherwise) on this machine, one after the other; utilisation is an"
        " island's compute over its wall time after probation, waits by cause"
        " (docs/devnet.md). All roles share the machine's cores, so an island's compute"
        " and the auditor's replays slow each other: the overlap gains most where"
        " compute outweighs the chain's work (the larger H). Held-out gaps are of short"
        " runs (the start of training, where the overlap costs most); the long-run cost"
        " is longrun-overlap-warm10.json's."
    )
    targets = {f"{t}_overlapped": "utilisation_steady >= 0.9 (issue 39)" for t, _ in plans}
    write_result("overlap", values, targets=targets, notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
