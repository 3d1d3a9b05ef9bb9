"""The CPU profile: the instruction-set and math-library switches that change training bits.

Torch picks its vectorised kernels (``ATEN_CPU_CAPABILITY``), MKL its code path
(``MKL_CBWR``) and oneDNN its JIT instruction set (``ONEDNN_MAX_CPU_ISA``) once, when
they load; each choice changes bytes. A run's determinism record carries the values its
bytes were made with (``settings.aten_cpu_capability``, ``settings.mkl_cbwr``,
``settings.onednn_max_cpu_isa``), and :func:`apply_profile` makes this process run with
them: it sets the three variables and, when torch is already loaded with other values,
re-executes the process once with them set. It refuses (:class:`ProfileError`) when the
CPU cannot give the record's instruction set, for example an AVX-512 record on an
AVX2-only host.

Two named profiles (:data:`PROFILES`): ``native`` (nothing pinned: the host's best
path; other hosts reproduce it only with the same instruction set and CPU vendor, which
the record then pins) and ``portable`` (AVX2 kernels, MKL's conditional-numerical-
reproducibility COMPATIBLE path and oneDNN capped at AVX2), which AVX2 and AVX-512
hosts of either vendor reproduce, at a cost measured in docs/BENCHMARKS.md. A
coordinator starts under a profile with :func:`profile_env` and records it with
``configure_determinism``.

This module imports torch only inside functions, so it can run before torch loads.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from hypertrain.protocol.manifest import DeterminismRecord
from hypertrain.trainer.errors import DeterminismError

ENV_KEYS: Final = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")
PROFILES: Final[dict[str, dict[str, str]]] = {
    "native": {},
    "portable": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    },
}
REEXEC_MARK: Final = "HYPERTRAIN_CPU_PROFILE_APPLIED"


class ProfileError(DeterminismError):
    """This process cannot run with the run's CPU profile."""


def profile_env(name: str) -> dict[str, str]:
    """The environment switches of the named profile (unset keys map to "")."""
    try:
        chosen = PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown CPU profile {name!r}; known: {', '.join(PROFILES)}") from None
    return {key: chosen.get(key, "") for key in ENV_KEYS}


def record_env(record: DeterminismRecord) -> dict[str, str]:
    """The environment a CPU record's bytes were made with ("" = unset)."""
    settings = record.settings
    return {
        "ATEN_CPU_CAPABILITY": settings.get("aten_cpu_capability", "").lower(),
        "MKL_CBWR": settings.get("mkl_cbwr", ""),
        "ONEDNN_MAX_CPU_ISA": settings.get("onednn_max_cpu_isa", ""),
    }


def _env_matches(wanted: dict[str, str]) -> bool:
    """Whether the math-library switches already hold ``wanted`` (the capability is
    checked against what torch reports instead: the host's own value needs no pin)."""
    return all(os.environ.get(k, "") == wanted[k] for k in ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA"))


def _capability() -> str:
    import torch

    return str(torch.backends.cpu.get_cpu_capability()).lower()


def apply_profile(record: DeterminismRecord, *, reexec: bool = True) -> None:
    """Run this process with the record's CPU switches (see the module docstring)."""
    if not record.device_class.startswith("cpu"):
        return
    wanted = record_env(record)
    loaded = "torch" in sys.modules
    if loaded and _env_matches(wanted) and _capability() == wanted["ATEN_CPU_CAPABILITY"]:
        return
    for key, value in wanted.items():
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)
    if not loaded:
        _check_capability(wanted["ATEN_CPU_CAPABILITY"])
        return
    if not reexec or os.environ.get(REEXEC_MARK):
        _check_capability(wanted["ATEN_CPU_CAPABILITY"])
        raise ProfileError(
            "torch was loaded with other CPU switches than the run's "
            f"({', '.join(f'{k}={v!r}' for k, v in wanted.items())}); start the process with "
            "them set"
        )
    os.environ[REEXEC_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    # The same interpreter and arguments: a fixed program, not a shell command.
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])  # noqa: S606


def _check_capability(wanted: str) -> None:
    have = _capability()
    if wanted and have != wanted:
        raise ProfileError(
            f"the run's bytes need ATEN_CPU_CAPABILITY={wanted}, but this CPU gives {have}: "
            "it cannot reproduce them (a portable-profile run accepts AVX2 and AVX-512 hosts)"
        )
