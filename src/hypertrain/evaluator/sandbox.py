"""Score one submitted model in a child process with a wall-clock and a memory limit.

Loading a submission runs library code (``transformers``, ``safetensors``, torch) on
bytes a stranger chose, after the pre-compute checks passed. Whatever that code does
(raise an exception the checks did not foresee, allocate without bound, loop, be
killed by a signal), it does it in a child process: the child's address space is
capped with ``resource.setrlimit(RLIMIT_AS)`` (set by the child itself before
it imports anything), no core is dumped, and the parent
kills the child's whole process group at the deadline. Every way the child can end
other than printing exactly one float32 per page is a :class:`SubmissionError`
with the reason, which the evaluator signs as that model's refusal and moves on.

The child is ``python -m hypertrain.evaluator.worker``; it applies the same
determinism switches as the parent, so its losses are the bytes the parent would
have computed itself.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from hypertrain.competition.messages import decode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError

REFUSED_EXIT: Final = 3  # the child refused the model itself (a SubmissionError)
_STDERR_TAIL: Final = 400
_MIB: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """What one model's scoring may use: wall-clock seconds and bytes of address space."""

    time_s: float = 600.0
    memory_bytes: int = 8 << 30

    def __post_init__(self) -> None:
        if self.time_s <= 0 or self.memory_bytes < 64 * _MIB:
            raise ValueError("the time limit must be > 0 and the memory limit >= 64 MiB")


def default_limits(spec: CompetitionSpec) -> Limits:
    """The spec's time per model (``cycle.model_time_limit_s``, which its score window
    holds); 2 GiB for the interpreter and libraries plus 8 bytes per byte of allowed model."""
    return Limits(
        time_s=spec.cycle.model_time_limit_s,
        memory_bytes=(2 << 30) + 8 * spec.architecture.max_bytes,
    )


# Runs in the child before anything else: cap its address space and CPU time, no core,
# then run the module (``-m NAME ARGS``) or code (``-c CODE ARGS``) it was given.
_LAUNCH: Final = """
import resource, runpy, sys
limit, cpu = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
mode, target, *rest = sys.argv[3:]
sys.argv = [target, *rest]
if mode == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<sandbox>", "exec"), {"__name__": "__main__"})
"""


def run_limited(python_args: list[str], limits: Limits) -> str:
    """Run ``python -m MOD ...`` or ``python -c CODE ...`` under ``limits``.

    Returns the child's stdout; every other ending is a :class:`SubmissionError`
    saying how it ended (over time, killed, refused, failed with its last stderr line).
    """
    if not python_args or python_args[0] not in ("-m", "-c") or len(python_args) < 2:
        raise ValueError("run_limited takes ['-m', MODULE, ...] or ['-c', CODE, ...]")
    # CPU seconds bound an orphaned child too (the wall clock is the parent's to enforce)
    cpu = str(max(1, math.ceil(4 * limits.time_s)))
    argv = [sys.executable, "-c", _LAUNCH, str(limits.memory_bytes), cpu, *python_args]
    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    ) as child:  # fmt: skip
        try:
            out, err = child.communicate(timeout=limits.time_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise SubmissionError(f"scoring took longer than {limits.time_s:g} s") from None
    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    if child.returncode == REFUSED_EXIT:
        raise SubmissionError(tail[0][:_STDERR_TAIL])
    if child.returncode < 0:
        raise SubmissionError(
            f"scoring was killed by signal {-child.returncode}"
            f" (memory limit {limits.memory_bytes // _MIB} MiB)"
        )
    if child.returncode != 0:
        raise SubmissionError(f"scoring failed (exit {child.returncode}): {tail[0][:_STDERR_TAIL]}")
    return out.decode("ascii", "replace")


def score_model(
    directory: Path,
    spec: CompetitionSpec,
    pages: npt.NDArray[np.int64],
    threads: int,
    limits: Limits,
) -> list[float]:
    """Page losses of the model in ``directory`` computed by a limited child process."""
    with tempfile.TemporaryDirectory(prefix="ht-score-") as tmp:
        spec_file, pages_file = Path(tmp) / "spec.json", Path(tmp) / "pages.npy"
        spec_file.write_text(spec.model_dump_json(), encoding="utf-8")
        np.save(pages_file, pages, allow_pickle=False)
        args = ["-m", "hypertrain.evaluator.worker", str(spec_file), str(directory),
                str(pages_file), str(threads)]  # fmt: skip
        out = run_limited(args, limits).strip()
    expected = 8 * pages.shape[0]
    if len(out) != expected or any(c not in "0123456789abcdef" for c in out):
        raise SubmissionError(f"scoring answered {len(out)} characters, not {expected} hex")
    return list(decode_losses(out))
