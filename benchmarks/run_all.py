"""Run every ``benchmarks/bench_*.py`` (or those named) and render docs/BENCHMARKS.md.

Usage: ``make bench`` or ``python benchmarks/run_all.py [NAME ...]`` where NAME is
``protocol``, ``trainer``, ... (``--render`` alone only redraws the page). Each script
runs in its own process so peak-memory figures do not leak between them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
DOC = HERE.parent / "docs" / "BENCHMARKS.md"
ON_REQUEST = ("bench_longrun", "bench_soak", "bench_overlap")  # long: run only when named

INTRO = """# Benchmarks

Each section below is one result file, `benchmarks/results/<section>.json`, written by
`benchmarks/bench_<section>.py` on the date and machine the section names; sections are
rerun one at a time (`python benchmarks/run_all.py NAME`), so their dates differ. Within
a section, ratios compare figures measured in the same run, except where its notes say
otherwise (`network` combines figures from the relay and merge result files). The target
column gives the project's target where one is set. These are measurements, not
promises: misses are recorded as they are. This page is regenerated from the result
files by `benchmarks/run_all.py` (`make bench` reruns every script first).
"""


def run_scripts(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    else:  # the long run and the soak take hours: only when named (both resume)
        scripts = [s for s in scripts if s.stem not in ON_REQUEST]
    failed = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        # Scripts import ``common`` from this folder and may import ``tests`` helpers.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
        if subprocess.run([sys.executable, str(script)], check=False, env=env).returncode:
            failed += 1
            print(f"!! {script.name} failed", flush=True)
    if (
        not names or "parity" in names
    ):  # the parity harness's quick grid (full grid: docs/parity.md)
        failed += (
            subprocess.run(
                [sys.executable, str(HERE / "parity.py"), "--quick"], check=False
            ).returncode
            != 0
        )
    return failed


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def render() -> str:
    parts = [INTRO]
    for path in sorted((HERE / "results").glob("*.json")):
        doc = json.loads(path.read_text())
        machine = doc.pop("machine", {})
        measured = doc.pop("measured_at", "?")
        targets = doc.pop("targets", {})
        notes = doc.pop("notes", "")
        parts.append(f"\n## {path.stem}\n")
        parts.append(
            f"Measured {measured} on {machine.get('cores')} cores of {machine.get('cpu_model')}, "
            f"Python {machine.get('python')}, torch {machine.get('torch')}.\n"
        )
        parts.append("| key | value | target |\n| --- | --- | --- |")
        parts.extend(
            f"| `{k}` | {_fmt(v)} | {targets.get(k, '')} |" for k, v in sorted(doc.items())
        )
        if notes:
            parts.append(f"\n{notes}")
    parts += parity_section()
    return "\n".join(parts) + "\n"


def parity_section() -> list[str]:
    """The parity grid's short table (benchmarks/results/parity/parity-combined.json)."""
    path = HERE / "results" / "parity" / "parity-combined.json"
    if not path.exists():
        return []
    from parity_stats import benchmarks_section

    doc = json.loads(path.read_text())
    if not doc.get("summary"):
        return []
    return ["\n## parity (DiLoCo vs data-parallel, docs/parity.md)\n", *benchmarks_section(doc)]


def main() -> int:
    names = sys.argv[1:]
    if names == ["--render"]:  # only redraw the page from the result files
        DOC.write_text(render())
        print(f"wrote {DOC}")
        return 0
    failed = run_scripts(names)
    DOC.write_text(render())
    print(f"wrote {DOC}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
