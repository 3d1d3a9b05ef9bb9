"""Shared helpers for benchmark scripts: the result-file convention and machine info.

Every result file is ``benchmarks/results/<name>.json``: a flat JSON object of the
measured keys plus ``machine``, ``measured_at``, and optional ``targets`` (key ->
human-readable target) and ``notes``. ``run_all.py`` renders them into docs/BENCHMARKS.md.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "torch": torch_version,
    }


def write_result(
    name: str,
    values: dict[str, Any],
    *,
    targets: dict[str, str] | None = None,
    notes: str = "",
) -> Path:
    """Write one benchmark result file following the project convention."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    doc = dict(values)
    doc["machine"] = machine_info()
    doc["measured_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if targets:
        doc["targets"] = targets
    if notes:
        doc["notes"] = notes
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
    return path


def best_of(fn: Callable[[], Any], repeats: int = 3) -> float:
    """Smallest wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
