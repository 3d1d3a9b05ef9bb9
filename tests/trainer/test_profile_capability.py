"""The portable CPU profile across instruction sets: one segment, two hosts' worth of
dispatch (this CPU's own, and one level lower wherever the profile leaves the choice to
the host), identical bytes. Under ``native`` the same pair is only recorded.

A "lower host" is simulated with the switches the libraries read at load time: MKL's
dispatch ceiling (``MKL_ENABLE_INSTRUCTIONS``) one level below this CPU, and ATen's
kernels (``ATEN_CPU_CAPABILITY``) one level below, unless the profile pins them (the
portable profile pins ``avx2``, which every host it admits has).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hypertrain.trainer.profile import ENV_KEYS, profile_env

ROOT = Path(__file__).resolve().parents[2]
LADDER = ("default", "avx2", "avx512")  # ATen's x86-64 capabilities, lowest first
MKL_LEVEL = {"default": "SSE4_2", "avx2": "AVX2", "avx512": "AVX512"}
SEGMENT = """
import json, torch
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.segment import run_segment
from hypertrain.trainer.state import init_state
from tests.trainer.conftest import make_config, make_samples
record = configure_determinism(1)
out = {"capability": str(torch.backends.cpu.get_cpu_capability()).lower(), "hashes": []}
for preset in ("tiny", "tiny-moe"):
    config = make_config(preset, layout=(2, 1, 2), steps=2, interval=2)
    start = init_state(config.state_config(), 11)
    samples = make_samples(2 * config.samples_per_step)
    out["hashes"].append(run_segment(start, config, samples, 2).state_hash().hex())
print(json.dumps(out))
"""


def _child(env_over: dict[str, str]) -> dict[str, Any]:
    keys = (*ENV_KEYS, "MKL_ENABLE_INSTRUCTIONS")
    env = {k: v for k, v in os.environ.items() if k not in keys}
    env |= {k: v for k, v in env_over.items() if v}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SEGMENT],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def native() -> dict[str, Any]:
    """This CPU as it is: its own capability and the native profile's bytes."""
    here = _child({})
    if here["capability"] not in LADDER:
        pytest.skip(f"capability {here['capability']!r} is not an x86-64 level this test lowers")
    if here["capability"] == LADDER[0]:
        pytest.skip("this CPU offers nothing below ATen's 'default' kernels")
    return here


def _lowered(profile: str, native: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The profile's environment on a host one level below this one."""
    lower = LADDER[LADDER.index(native["capability"]) - 1]
    env = profile_env(profile)
    over = {
        **env,
        "ATEN_CPU_CAPABILITY": env["ATEN_CPU_CAPABILITY"] or lower,
        "MKL_ENABLE_INSTRUCTIONS": MKL_LEVEL[lower],
    }
    return _child(over), lower


@pytest.mark.slow
def test_portable_bytes_are_the_same_on_a_lower_host(native: dict[str, Any]) -> None:
    here = _child(profile_env("portable"))
    below, _ = _lowered("portable", native)
    assert here["capability"] == below["capability"] == "avx2"  # the profile's pin
    assert here["hashes"] == below["hashes"]


@pytest.mark.slow
def test_native_bytes_on_a_lower_host_are_recorded(
    native: dict[str, Any], record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    here = native
    below, lower = _lowered("native", native)
    assert below["capability"] == lower and here["capability"] != lower
    differ = here["hashes"] != below["hashes"]
    record_property("native_bytes_differ_on_a_lower_host", differ)
    with capsys.disabled():
        print(f"\nnative profile, {here['capability']} vs {lower}: bytes differ = {differ}")
