"""Fixtures of the network tests: a local drand-compatible beacon per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.beacon import LocalBeaconProcess, start_local_beacon


@pytest.fixture
def beacon(tmp_path: Path) -> Iterator[LocalBeaconProcess]:
    """A beacon with a 1 s period, its state under the test's own directory."""
    with start_local_beacon(tmp_path / "beacon", period_s=1) as b:
        yield b
