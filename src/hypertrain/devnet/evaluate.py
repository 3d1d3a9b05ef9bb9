"""The final model: fetched from the relay, checked, exported for transformers.

Held-out losses are not computed here: the aggregator measures every merged model
on the dataset's fixed held-out slice (:mod:`hypertrain.aggregator.heldout`) and
posts the figure with its merge tape, so the terminal, the report and the web
dashboard all show the same numbers. :func:`heldout_batch` gives the same slice
for tests that check an exported model against those figures.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

from hypertrain.aggregator import heldout
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.export import export_llama


def heldout_batch(dataset_dir: Path) -> torch.Tensor:
    """The aggregator's held-out samples of a prepared dataset, as a [B, T] tensor."""
    return heldout.heldout_batch(Dataset(dataset_dir / DESCRIPTOR_NAME))


def fetch_model(url: str, sha256: str, spec: ModelSpec) -> dict[str, torch.Tensor]:
    response = httpx.get(url, timeout=60)
    response.raise_for_status()
    return decode_model_blob(response.content, spec, expected_sha256=sha256)


def export_final(params: dict[str, torch.Tensor], spec: ModelSpec, out_dir: Path) -> Path:
    """Write a transformers-loadable Llama directory of the final model."""
    return export_llama(params, spec, out_dir)
