"""Shared builders for trainer tests: tiny configs and reproducible token samples."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import Sample, TrainConfig

SEQ_LEN = 17


def make_config(
    preset: str = "tiny",
    *,
    layout: tuple[int, int, int] = (1, 1, 4),
    steps: int = 4,
    interval: int = 2,
    **inner: Any,
) -> TrainConfig:
    ranks, micro, size = layout
    return TrainConfig(
        model=PRESETS[preset],
        inner=InnerOptimSpec(**{"warmup_steps": 2, "total_steps": 20, **inner}),
        layout=LayoutSpec(dp_ranks=ranks, micro_batches=micro, micro_batch_size=size),
        seq_len=SEQ_LEN,
        inner_steps=steps,
        checkpoint_interval=interval,
    )


def make_samples(count: int, vocab: int = 64, seed: int = 0, start_id: int = 0) -> list[Sample]:
    """Deterministic pseudo-text: a noisy repeating pattern a model can learn."""
    rng = np.random.default_rng(seed)
    out: list[Sample] = []
    for i in range(count):
        base = (np.arange(SEQ_LEN) * 3 + start_id + i) % vocab
        noise = rng.integers(0, vocab, SEQ_LEN)
        mask = rng.random(SEQ_LEN) < 0.2
        out.append((start_id + i, np.where(mask, noise, base).astype(np.uint16)))
    return out


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Trainer tests run single-threaded (fast on a shared box); the count is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def config_factory() -> Callable[..., TrainConfig]:
    return make_config


@pytest.fixture
def samples_factory() -> Callable[..., list[Sample]]:
    return make_samples
