"""Shared fixtures: paths to the repository's real test data."""

from __future__ import annotations

from pathlib import Path

import pytest

ASSETS_DIR = Path(__file__).parent / "assets"


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    return ASSETS_DIR
