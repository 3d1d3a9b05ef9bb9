"""Held-out loss of a merged model: the number behind the dashboard's training curve.

Islands never train on the dataset's held-out split (``data.split``), so the loss of
each new model on a fixed slice of it is an honest progress measure. The slice is
the first ``EVAL_SAMPLES`` held-out ids in id order, evaluated in float32 with
gradients off, so every round is measured on the same tokens and the numbers are
comparable across rounds and reproducible by anyone holding the dataset and the
model blob. The figure is informational (it rides on the merge-tape message as
``eval_loss``); it never feeds a hash, a verdict or a reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import torch

from hypertrain.aggregator.errors import AggregatorError
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.model import forward

EVAL_SAMPLES: Final = 32


def heldout_batch(dataset: Dataset, samples: int = EVAL_SAMPLES) -> torch.Tensor:
    """The first ``samples`` held-out samples as a ``[B, T]`` int64 tensor."""
    ids = [int(i) for i in dataset.split().heldout_ids[:samples]]
    if not ids:
        raise AggregatorError("the dataset has no held-out samples to evaluate on")
    return torch.stack([torch.from_numpy(dataset.sample(i).astype("int64")) for i in ids])


def open_heldout(dataset_dir: Path, manifest: RunManifest) -> torch.Tensor:
    """The held-out batch of the run's own dataset (its descriptor hash is checked)."""
    try:
        dataset = Dataset(
            dataset_dir / DESCRIPTOR_NAME, expected_sha256=manifest.data.descriptor_sha256
        )
    except (OSError, ValueError) as exc:
        raise AggregatorError(f"dataset in {dataset_dir}: {exc}") from None
    return heldout_batch(dataset)


def heldout_loss(
    params: dict[str, torch.Tensor], manifest: RunManifest, batch: torch.Tensor
) -> float:
    """Mean next-token cross-entropy of ``params`` on ``batch`` (float32, no gradients).

    Plain cross-entropy, without the mixture-of-experts balancing term the training
    loss adds, so the figure equals what any causal-LM library reports for the model.
    """
    with torch.no_grad():
        full = {k: v.float() for k, v in params.items()}
        logits, _ = forward(full, manifest.model, batch[:, :-1])  # (B, T-1, V)
        targets = batch[:, 1:].reshape(-1)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)
        return float(ce)
