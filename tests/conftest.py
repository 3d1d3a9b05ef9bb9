"""Shared fixtures: paths to the repository's real test data, and the models trained on it
that both the competition's and the evaluator's tests score (session-scoped: built once per
test process, each model only when a test reads it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # torch and the trainer load only for the tests that train
    from tests.competition.models import Trained

ASSETS_DIR = Path(__file__).parent / "assets"


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    return ASSETS_DIR


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """A real dataset and four tiny Llama models, each trained when first read
    (tests/competition/models.py)."""
    from tests.competition.models import Trained

    return Trained(tmp_path_factory.mktemp("compete-data"))
