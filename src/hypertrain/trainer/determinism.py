"""Every switch that changes the bits of a training step, set in exactly one place.

:func:`configure_determinism` turns on deterministic algorithms, pins the intra-op
thread count (a full reduction over millions of floats differs between 1 and 2
threads), turns TF32 off, requires ``CUBLAS_WORKSPACE_CONFIG`` and pins attention to
the math SDPA backend on CUDA (recorded as ``sdpa_backend``), and
returns a :class:`DeterminismRecord` of what it set and what the process runs with:
torch version, the CPU instruction-set dispatch (``ATEN_CPU_CAPABILITY``) and the
math-library pins (``MKL_CBWR``, ``ONEDNN_MAX_CPU_ISA``), the MKL and oneDNN versions and
the CPU vendor (MKL's paths, its COMPATIBLE one included, differ between vendors). The
three switches are read when torch loads: ``profile.apply_profile`` sets them (and
re-executes the process) before anything trains; this module records them. The record
goes into the manifest; :func:`check_determinism` refuses to replay when the local one
differs.
"""

from __future__ import annotations

import os
import platform
import re
from typing import Any, Literal

import torch

from hypertrain.protocol.manifest import DeterminismRecord
from hypertrain.trainer.errors import DeterminismError

DType = Literal["float32", "bfloat16"]
_CUBLAS_WORKSPACE = ":4096:8"
_RECORDED_ENV = ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def device_class(device: str = "cpu") -> str:
    """A short name of the hardware class whose bits a replayer must share."""
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return f"cuda:{props.name}:sm{props.major}{props.minor}"
    return f"cpu:{platform.machine()}:{torch.backends.cpu.get_cpu_capability()}"


def configure_determinism(
    num_threads: int, device: str = "cpu", dtype: DType = "float32"
) -> DeterminismRecord:
    """Set every determinism switch for this process and return the record of it."""
    if num_threads < 1:
        raise DeterminismError(f"num_threads must be >= 1, got {num_threads}")
    if dtype == "bfloat16" and not device.startswith("cuda"):
        raise DeterminismError("bfloat16 autocast is only supported on CUDA (float32 on CPU)")
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", _CUBLAS_WORKSPACE)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        # Attention: the math backend only (flash and memory-efficient kernels choose
        # their tiling by device and accumulate in backward with atomics).
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_math_sdp(True)
    torch.use_deterministic_algorithms(True)
    if torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)
    return current_record(device, dtype)


def current_record(device: str = "cpu", dtype: DType = "float32") -> DeterminismRecord:
    """The record of the switches this process runs with right now (sets nothing)."""
    settings = {
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "deterministic_algorithms": str(torch.are_deterministic_algorithms_enabled()).lower(),
    }
    for name in _RECORDED_ENV:
        settings[name.lower()] = os.environ.get(name, "")
    settings.update(math_libraries())
    # MKL's automatic path differs between vendors, and so, for some shapes, does its
    # COMPATIBLE path (measured: the parity harness's quick curve, tests/benchmarks/
    # parity_known_answer.json), so the vendor is always part of the record.
    settings["cpu_vendor"] = cpu_vendor()
    if device.startswith("cuda"):
        settings["cublas_workspace_config"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
        settings["tf32"] = str(torch.backends.cuda.matmul.allow_tf32).lower()
        settings["cuda"] = str(torch.version.cuda)
        settings["sdpa_backend"] = _sdpa_backends()
    return DeterminismRecord(
        torch_version=torch.__version__,
        num_threads=torch.get_num_threads(),
        device_class=device_class(device),
        dtype=dtype,
        settings=settings,
    )


def _sdpa_backends() -> str:
    """The enabled scaled-dot-product attention backends, e.g. ``"math"``."""
    cuda: Any = torch.backends.cuda  # the *_sdp_enabled functions are untyped
    enabled = {
        "flash": cuda.flash_sdp_enabled(),
        "mem_efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
    }
    return ",".join(name for name, on in enabled.items() if on)


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str:
    """``vendor_id`` from /proc/cpuinfo (e.g. GenuineIntel, AuthenticAMD); on Arm, which
    has none, ``arm:`` and the ``CPU implementer`` code (0x41 Arm, 0xc0 Ampere, ...);
    else the platform's."""
    implementer = ""
    try:
        with open(cpuinfo, encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
                if key.strip() == "CPU implementer" and not implementer:
                    implementer = value.strip()
    except OSError:
        pass
    if implementer:
        return f"arm:{implementer}"
    return platform.processor() or platform.machine()


def math_libraries() -> dict[str, str]:
    """MKL and oneDNN versions torch was built with (from ``torch.__config__.show()``)."""
    shown = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([0-9.]+)", shown)
    onednn = re.search(r"MKL-DNN v([0-9.]+)", shown)
    return {
        "mkl_version": mkl.group(1) if mkl else "",
        "onednn_version": onednn.group(1) if onednn else "",
    }


def record_differences(local: DeterminismRecord, expected: DeterminismRecord) -> list[str]:
    """Human-readable ``field: local != expected`` lines; empty when they match."""
    diffs: list[str] = []
    a, b = local.model_dump(), expected.model_dump()
    for key in ("torch_version", "num_threads", "device_class", "dtype"):
        if a[key] != b[key]:
            diffs.append(f"{key}: local {a[key]!r} != manifest {b[key]!r}")
    for key in sorted(set(a["settings"]) | set(b["settings"])):
        mine, theirs = a["settings"].get(key), b["settings"].get(key)
        if mine != theirs:
            diffs.append(f"settings.{key}: local {mine!r} != manifest {theirs!r}")
    return diffs


def check_determinism(local: DeterminismRecord, expected: DeterminismRecord) -> None:
    """Refuse (raise :class:`DeterminismError`) unless the records match exactly."""
    diffs = record_differences(local, expected)
    if diffs:
        raise DeterminismError(
            "this machine cannot reproduce the run's bytes; refusing to replay: " + "; ".join(diffs)
        )
