"""The soak: the devnet under a CPU hog while its roles are killed and restarted at random.

Usage::

    python benchmarks/bench_soak.py [--rounds 20] [--scenario default --scenario rollback]
        [--seed 0] [--kill-every 3] [--hog-per-core 2 | --no-hog] [--state .cache/soak]
        [--fresh]

For each scenario (both by default) it runs the product's devnet (``hypertrain devnet``,
every role its own process on loopback, tiny preset) for ``--rounds`` rounds with
``--chaos-every``: every ``--kill-every`` rounds the devnet SIGKILLs one role (the
service, the relay, the aggregator, the auditor, an island or the witness, drawn so that
six kills hit each once) and restarts it on its own state. Meanwhile a CPU hog (
``--hog-per-core`` spinning processes per core) keeps the load average at twice the cores
or more. While it runs, the dashboard document is polled every second and the load
average sampled.

It records per scenario: rounds opened per hour, the longest gap between two round opens
against the median one, rounds that never opened or never settled, the ledger's
verification and the units lost or doubled (what was minted against one pool per
settled round and against what the balances hold), whether any role exited (the devnet
fails on a child's exit), the kills, the load seen, wall time and the commit. Targets:
0 rounds unopened or unsettled, ledger verified, 0 units lost or doubled, no role exit,
longest gap <= 3x the median round.

Resuming: each scenario's figures are kept in ``STATE/<scenario>/figures.json``; a rerun
skips a scenario that has them (``--fresh`` runs it again). A scenario that fails (the
devnet exits non-zero, times out or is interrupted) is recorded with its reason and its
partial figures, and its devnet state and logs stay in ``STATE/<scenario>/devnet``.
Writes ``benchmarks/results/soak.json``. ``make bench`` runs it only when named
(``ARGS=soak``): it takes about an hour on two cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from common import write_result
from hypertrain.devnet.chaos import ledger_check
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.roles import RUN_ID
from longrun_report import commit

ROOT = Path(__file__).resolve().parent.parent
GAP_RATIO_TARGET = 3.0
INTERRUPTED = "interrupted (SIGINT or SIGTERM) before the devnet finished"
# the tiny network of the devnet's own end-to-end tests (tests/devnet/test_rollback_scenario.py)
TINY = ["--h", "4", "--j", "2", "--preset", "tiny", "--seq-len", "32", "--vocab-size", "512",
        "--islands", "2"]  # fmt: skip
SCENARIO_ARGS = {
    "default": ["--honeypot", "bad-update"],
    "rollback": ["--honeypot", "wrong-samples", "--audit-window-s", "15"],
}


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` reports like Ctrl-C does
    figures: dict[str, Any] = {}
    for scenario in args.scenario or ["default", "rollback"]:
        figures[scenario] = soak_once(args, scenario)
        if figures[scenario]["failure"] == INTERRUPTED:
            break
    values, misses = flatten(figures, args)
    write_result("soak", values, targets=TARGETS, notes=notes(args, misses))
    print(json.dumps({"misses": misses}, indent=1))
    return 0 if not misses else 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=20, help="rounds per scenario (default 20)")
    p.add_argument("--scenario", action="append", choices=sorted(SCENARIO_ARGS),
                   help="repeatable; default: default and rollback")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the chaos loop's draws")
    p.add_argument("--kill-every", type=int, default=3, help="rounds between two kills")
    p.add_argument("--hog-per-core", type=int, default=2, help="spinning processes per core")
    p.add_argument("--no-hog", action="store_true", help="run without the CPU hog")
    p.add_argument("--state", type=Path, default=ROOT / ".cache" / "soak")
    p.add_argument("--timeout-s", type=float, default=5400.0, help="per scenario")
    p.add_argument("--fresh", action="store_true", help="ignore figures saved by a past run")
    return p.parse_args()


def soak_once(args: argparse.Namespace, scenario: str) -> dict[str, Any]:
    """One scenario's figures (saved ones when a past run finished it)."""
    state = args.state / scenario
    saved = state / "figures.json"
    if saved.exists() and not args.fresh:
        print(f"{scenario}: figures of a past run ({saved}); --fresh runs it again")
        figures: dict[str, Any] = json.loads(saved.read_text())
        return figures
    state.mkdir(parents=True, exist_ok=True)
    saved.unlink(missing_ok=True)
    hog = [] if args.no_hog else start_hog(args.hog_per_core)
    try:
        figures = run_devnet(args, scenario, state)
    finally:
        stop_all(hog)
    if figures["failure"] is None:  # a failed scenario runs again next time
        saved.write_text(json.dumps(figures, indent=1))
    return figures


def start_hog(per_core: int) -> list[subprocess.Popen[bytes]]:
    """``per_core`` spinning processes per core, each its own process group."""
    spin = [sys.executable, "-c", "while True: pass"]
    count = per_core * (os.cpu_count() or 1)
    return [subprocess.Popen(spin, start_new_session=True) for _ in range(count)]


def stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def devnet_cmd(args: argparse.Namespace, scenario: str, state: Path, port: int) -> list[str]:
    return [
        *(sys.executable, "-m", "hypertrain.cli", "devnet", "--scenario", scenario),
        *("--rounds", str(args.rounds), *TINY, *SCENARIO_ARGS[scenario]),
        *("--port", str(port), "--state-dir", str(state / "devnet")),
        *("--cache-dir", str(ROOT / ".cache" / "devnet"), "--keep", "--exit-when-done"),
        *("--report", str(state / "report.json"), "--timeout-s", str(args.timeout_s)),
        *("--chaos-every", str(args.kill_every), "--chaos-seed", str(args.seed)),
    ]


def run_devnet(args: argparse.Namespace, scenario: str, state: Path) -> dict[str, Any]:
    """Run the devnet to its end, polling its dashboard; its figures."""
    port, report = free_port(), state / "report.json"
    report.unlink(missing_ok=True)
    out = (state / "devnet.out").open("wb")
    started, loads, failure = time.time(), [], None
    devnet = subprocess.Popen(devnet_cmd(args, scenario, state, port), stdout=out,
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    doc: dict[str, Any] | None = None
    try:
        while devnet.poll() is None:
            doc = poll(f"http://127.0.0.1:{port}", state) or doc
            loads.append(os.getloadavg()[0])
            time.sleep(1.0)
        if devnet.returncode != 0:
            failure = f"the devnet exited with {devnet.returncode}: {reason(tail(state))}"
    except KeyboardInterrupt:  # the figures so far are still measured and written
        failure = INTERRUPTED
    finally:
        if devnet.poll() is None:  # interrupted: the devnet stops its own children
            os.killpg(devnet.pid, signal.SIGTERM)
            devnet.wait(timeout=120)
        out.close()
        figures = measure(args, state, doc, loads, failure)
        figures["wall_s"] = round(time.time() - started, 1)
        (state / "figures.partial.json").write_text(json.dumps(figures, indent=1))
    return figures


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def poll(url: str, state: Path) -> dict[str, Any] | None:
    """The dashboard document (saved beside the figures); None while it is away."""
    try:
        r = httpx.get(f"{url}/v1/runs/{RUN_ID}/dashboard", timeout=10)
        r.raise_for_status()
    except httpx.HTTPError:
        return None
    doc: dict[str, Any] = r.json()
    (state / "dashboard.json").write_text(json.dumps(doc))
    return doc


def reason(out: str) -> str:
    """The devnet's own error line (``error: ...``), else the end of its output; the
    whole output stays in ``STATE/<scenario>/devnet.out``."""
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    return errors[-1] if errors else out[-300:]


def tail(state: Path, chars: int = 1500) -> str:
    return (state / "devnet.out").read_text(errors="replace")[-chars:]


def measure(
    args: argparse.Namespace,
    state: Path,
    doc: dict[str, Any] | None,
    loads: list[float],
    failure: str | None,
) -> dict[str, Any]:
    """The scenario's figures from its last dashboard document, report and ledger."""
    rounds = sorted((doc or {}).get("rounds", []), key=lambda r: r["round"])
    planned = range(args.rounds)
    seen = {r["round"]: r for r in rounds}
    report = (
        json.loads((state / "report.json").read_text()) if (state / "report.json").exists() else {}
    )
    figures: dict[str, Any] = {
        "failure": failure,
        "rounds_opened": len(rounds),
        "rounds_never_opened": sum(1 for i in planned if i not in seen),
        "rounds_never_settled": sum(1 for i in planned if seen.get(i, {}).get("phase") != "final"),
        # settled with no commit: every island missed the commit window (a service that
        # was down past it); not a stall, but a round the network lost
        "rounds_without_commits": sum(1 for r in rounds if r["commits"] == 0),
        **gaps([r["started_unix"] for r in rounds]),
        **money(state),
        "kills": kills(report, tail(state, 1 << 24)),
        "role_exited": bool(re.search(r"exited (with status|while starting)", tail(state))),
        "load_mean": round(statistics.fmean(loads), 2) if loads else None,
        "load_max": round(max(loads), 2) if loads else None,
        "cores": os.cpu_count(),
        "hog_processes": 0 if args.no_hog else args.hog_per_core * (os.cpu_count() or 1),
    }
    return figures


def gaps(opened_unix: list[int]) -> dict[str, Any]:
    """Rounds opened per hour and the longest gap between two opens against the median."""
    steps = [b - a for a, b in itertools.pairwise(opened_unix)]
    if not steps:
        return {"rounds_per_hour": None, "longest_gap_s": None, "median_round_s": None,
                "longest_gap_over_median": None}  # fmt: skip
    span = opened_unix[-1] - opened_unix[0]
    median = statistics.median(steps)
    return {
        "rounds_per_hour": round(len(steps) * 3600 / span, 1) if span else None,
        "longest_gap_s": max(steps),
        "median_round_s": median,
        "longest_gap_over_median": round(max(steps) / median, 2) if median else None,
    }


def money(state: Path) -> dict[str, Any]:
    """The ledger check on the service's state the devnet kept."""
    service = state / "devnet" / "state" / "service"
    try:
        check = ledger_check(service, RUN_ID)
    except (DevnetError, OSError, ValueError, subprocess.SubprocessError) as exc:  # a figure
        return {"ledger_verified": False, "units_lost_or_doubled": None,
                "ledger_error": str(exc)[:300]}  # fmt: skip
    return {
        "ledger_verified": check.verified,
        "units_lost_or_doubled": check.units_lost_or_doubled,
        "minted": check.minted,
        "rounds_settled_in_ledger": check.rounds_settled,
    }


def kills(report: dict[str, Any], out: str) -> list[str]:
    """``role@round`` per kill: from the report, or (a failed run has none) the child
    names the devnet logged as restarted."""
    if "chaos" in report:
        return [f"{k['role']}@{k['round']}" for k in report["chaos"]]
    return re.findall(r"restarted (\S+) \(pid", out)


TARGETS = {
    "*_rounds_never_opened": "0",
    "*_rounds_never_settled": "0",
    "*_ledger_verified": "true",
    "*_units_lost_or_doubled": "0",
    "*_role_exited": "false",
    "*_longest_gap_over_median": f"<= {GAP_RATIO_TARGET:g}",
    "*_load_mean": ">= 2 x cores",
}


def misses_of(scenario: str, f: dict[str, Any]) -> list[str]:
    checks = {
        "failure": f["failure"] is None,
        "rounds_never_opened": f["rounds_never_opened"] == 0,
        "rounds_never_settled": f["rounds_never_settled"] == 0,
        "ledger_verified": f["ledger_verified"] is True,
        "units_lost_or_doubled": f["units_lost_or_doubled"] == 0,
        "role_exited": f["role_exited"] is False,
        "longest_gap_over_median": (f["longest_gap_over_median"] or 1e9) <= GAP_RATIO_TARGET,
    }
    return [f"{scenario}: {name}" for name, ok in checks.items() if not ok]


def flatten(
    figures: dict[str, dict[str, Any]], args: argparse.Namespace
) -> tuple[dict[str, Any], list[str]]:
    """One flat result (``<scenario>_<figure>``, as BENCHMARKS.md renders it) and the
    targets missed."""
    values: dict[str, Any] = {"commit": commit(), "rounds": args.rounds,
                              "kill_every_rounds": args.kill_every, "seed": args.seed}  # fmt: skip
    misses: list[str] = []
    for scenario, f in figures.items():
        values |= {f"{scenario}_{k}": v for k, v in f.items()}
        misses += misses_of(scenario, f)
        if not args.no_hog and (f["load_mean"] or 0) < 2 * (f["cores"] or 1):
            misses.append(f"{scenario}: load_mean below 2 x cores")
    values["targets_met"] = not misses
    return values, misses


def notes(args: argparse.Namespace, misses: list[str]) -> str:
    hog = (
        "no CPU hog"
        if args.no_hog
        else f"a CPU hog of {args.hog_per_core} spinning processes per core"
    )
    text = (
        f"The devnet (tiny preset, H = 4, J = 2, two honest islands and the honeypot) for"
        f" {args.rounds} rounds per scenario under {hog}, one role SIGKILLed and restarted"
        f" on its own state every {args.kill_every} rounds (`hypertrain devnet --chaos-every`)."
        " Gaps are between consecutive round opens (the service's `started_unix`)."
    )
    return text + (" Missed: " + "; ".join(misses) + "." if misses else " Every target met.")


if __name__ == "__main__":
    raise SystemExit(main())
