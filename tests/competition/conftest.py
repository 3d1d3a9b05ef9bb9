"""Fixtures: a real dataset and three briefly trained tiny models (session-scoped)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from hypertrain.data.dataset import Dataset
from hypertrain.protocol.manifest import ModelSpec
from tests.competition import models


@dataclass(frozen=True)
class Trained:
    dataset: Dataset
    dataset_dir: Path
    spec: ModelSpec
    weak: dict[str, torch.Tensor]  # the incumbent
    slightly: dict[str, torch.Tensor]  # a hair better than weak (within epsilon)
    strong: dict[str, torch.Tensor]  # clearly better
    public: dict[str, torch.Tensor]  # memorized the public held-out split (models.memorize)


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    root = tmp_path_factory.mktemp("compete-data")
    ds = models.dataset(root)
    spec = models.model_spec(ds)
    weak = models.train(ds, spec, steps=15)
    strong = models.train(ds, spec, steps=60)
    slightly = models.blend(weak, strong, 0.01)
    return Trained(ds, root / "dataset", spec, weak, slightly, strong, models.memorize(ds, spec))
