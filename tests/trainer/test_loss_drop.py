"""The proxy preset learns real text: byte-level tinyshakespeare, a test-sized budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.trainer.presets import proxy
from hypertrain.trainer.segment import TrainConfig, run_round
from hypertrain.trainer.state import init_state

SEQ_LEN, STEPS, BATCH = 65, 30, 8


def test_proxy_loss_falls_on_shakespeare(assets_dir: Path) -> None:
    text = (assets_dir / "tinyshakespeare.txt").read_bytes()
    ids = np.frombuffer(text, dtype=np.uint8)
    starts = np.random.default_rng(0).integers(0, len(ids) - SEQ_LEN, STEPS * BATCH)
    samples = [(i, ids[s : s + SEQ_LEN]) for i, s in enumerate(starts)]
    cfg = TrainConfig(
        model=proxy(vocab_size=256),
        inner=InnerOptimSpec(lr=3e-3, warmup_steps=5, total_steps=STEPS),
        layout=LayoutSpec(micro_batch_size=BATCH),
        seq_len=SEQ_LEN,
        inner_steps=STEPS,
        checkpoint_interval=STEPS,
    )
    result = run_round(init_state(cfg.state_config(), 0), cfg, samples)
    first, last = np.mean(result.losses[:3]), np.mean(result.losses[-3:])
    assert result.losses[0] > 5.0, result.losses  # ~ln(256) at initialisation
    assert last < first - 1.5, result.losses
