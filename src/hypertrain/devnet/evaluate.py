"""Held-out loss of a model, and the final model's export for transformers.

The devnet measures every merged model on the same fixed held-out samples (the
dataset's held-out split, never trained on), in float32 with gradients off, so the
per-round losses are comparable. The same function is used by the test that checks
the exported directory loads in transformers and gives the same loss.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.export import export_llama
from hypertrain.trainer.model import loss_fn

EVAL_SAMPLES = 32


def heldout_batch(dataset_dir: Path, samples: int = EVAL_SAMPLES) -> torch.Tensor:
    """The first ``samples`` held-out samples as a [B, T] int64 tensor."""
    dataset = Dataset(dataset_dir / DESCRIPTOR_NAME)
    ids = [int(i) for i in dataset.split().heldout_ids[:samples]]
    if not ids:
        ids = list(range(min(samples, len(dataset))))
    rows = [torch.from_numpy(dataset.sample(i).astype("int64")) for i in ids]
    return torch.stack(rows)


def heldout_loss(params: dict[str, torch.Tensor], spec: ModelSpec, batch: torch.Tensor) -> float:
    with torch.no_grad():
        return float(loss_fn({k: v.float() for k, v in params.items()}, spec, batch))


def fetch_model(url: str, sha256: str, spec: ModelSpec) -> dict[str, torch.Tensor]:
    response = httpx.get(url, timeout=60)
    response.raise_for_status()
    return decode_model_blob(response.content, spec, expected_sha256=sha256)


def export_final(params: dict[str, torch.Tensor], spec: ModelSpec, out_dir: Path) -> Path:
    """Write a transformers-loadable Llama directory of the final model."""
    return export_llama(params, spec, out_dir)
