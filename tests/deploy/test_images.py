"""The image build files: pins taken from pyproject.toml, and the canary against a real image.

The canary test builds nothing itself: it runs scripts/canary.sh against the server image
``make images`` built, and skips (saying why) where podman or the image is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
DEPS = REPO / "docker" / "pyproject_deps.py"
IMAGE = os.environ.get("HYPERTRAIN_CANARY_IMAGE", "localhost/hypertrain-server:latest")


def deps(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(DEPS), str(REPO / "pyproject.toml"), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return out.splitlines()


def test_server_requirements_are_every_pin_but_torch() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    server = deps("--exclude", "torch")
    assert server == [d for d in declared if not d.startswith("torch")]
    assert all("==" in line for line in server), "images install exact pins only"
    assert deps("--only", "torch") == ["torch==2.13.0"]


def test_requirement_names_are_normalised() -> None:
    assert deps("--only", "Py_Arkworks.BLS12381") == ["py-arkworks-bls12381==0.5.0"]


def test_build_context_leaves_out_the_working_tree() -> None:
    ignore = (REPO / ".containerignore").read_text().splitlines()
    assert ignore[ignore.index("*") :][:1] == ["*"], "the context starts from nothing"
    for needed in ("!pyproject.toml", "!setup.py", "!README.md", "!src/"):
        assert needed in ignore


def test_server_image_runs_as_65532_with_data_the_only_volume() -> None:
    text = (REPO / "docker" / "Dockerfile.server").read_text()
    assert "USER 65532:65532" in text
    assert 'VOLUME ["/data"]' in text
    assert "--exclude torch" in text and "--no-deps" in text
    assert "ARG BASE_IMAGE=" in text


def _podman_ready() -> str | None:
    podman = shutil.which("podman")
    if podman is None:
        return "podman is not installed (apt-get install podman runc)"
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker" / "containers.conf")}
    exists = subprocess.run(
        [podman, "image", "exists", IMAGE], env=env, capture_output=True, timeout=120
    )
    if exists.returncode != 0:
        return f"the image {IMAGE} is not built (make images)"
    return None


@pytest.mark.slow
def test_canary_passes_against_the_built_server_image() -> None:
    reason = _podman_ready()
    if reason is not None:
        pytest.skip(reason)
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "canary.sh"), IMAGE],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"canary: PASS {IMAGE}" in result.stdout
    # It cleans up after itself: neither of its containers is left behind.
    match = re.search(r" as (hypertrain-canary-\d+) ", result.stdout)
    assert match is not None, result.stdout
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker" / "containers.conf")}
    for name in (match.group(1), match.group(1) + "-relay"):
        left = subprocess.run(
            ["podman", "container", "exists", name], env=env, capture_output=True, timeout=120
        )
        assert left.returncode == 1, f"the canary left {name} behind"
