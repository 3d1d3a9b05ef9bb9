"""The run's CPU profile is applied before training (re-executing the process when torch
is already loaded) and a profile this CPU cannot give is refused with a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hypertrain.trainer.determinism import current_record
from hypertrain.trainer.profile import (
    REEXEC_MARK,
    ProfileError,
    apply_profile,
    profile_env,
    record_env,
)

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import os, sys, torch
from hypertrain.protocol.manifest import DeterminismRecord
from hypertrain.trainer.profile import apply_profile
apply_profile(DeterminismRecord.model_validate_json(sys.argv[1]))
print(os.environ.get("MKL_CBWR", ""), os.environ.get("{mark}", ""))
""".replace("{mark}", REEXEC_MARK)


def _probe(record_json: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", REEXEC_MARK)}
    return subprocess.run(
        [sys.executable, "-c", PROBE, record_json],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,  # a hang guard only: a loaded machine imports torch slowly
    )


def test_named_profiles() -> None:
    portable = profile_env("portable")
    assert portable == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }
    assert set(profile_env("native").values()) == {""}
    with pytest.raises(ProfileError, match="unknown CPU profile"):
        profile_env("fastest")


def test_the_current_record_needs_nothing() -> None:
    record = current_record()
    assert (
        record_env(record)["ATEN_CPU_CAPABILITY"] == record.settings["aten_cpu_capability"].lower()
    )
    apply_profile(record, reexec=False)  # already honoured: no error, no re-exec


def test_a_loaded_torch_with_other_switches_is_refused_without_reexec() -> None:
    record = current_record()
    other = record.model_copy(update={"settings": {**record.settings, "mkl_cbwr": "COMPATIBLE"}})
    saved = {
        k: os.environ.get(k) for k in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
    }
    try:
        with pytest.raises(ProfileError, match="start the process with them set"):
            apply_profile(other, reexec=False)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_the_process_reexecutes_with_the_record_switches() -> None:
    record = current_record()
    other = record.model_copy(update={"settings": {**record.settings, "mkl_cbwr": "COMPATIBLE"}})
    done = _probe(other.model_dump_json())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["COMPATIBLE", "1"]


def test_an_instruction_set_this_cpu_cannot_give_is_refused() -> None:
    record = current_record()
    other = record.model_copy(
        update={"settings": {**record.settings, "aten_cpu_capability": "ZVECTOR"}}
    )
    done = _probe(other.model_dump_json())
    assert done.returncode != 0
    assert "ProfileError" in done.stderr and "cannot reproduce" in done.stderr
