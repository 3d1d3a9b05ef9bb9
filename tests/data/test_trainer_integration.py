"""End to end: a proxy-preset model trains on the samples assigned to one island."""

from __future__ import annotations

import pytest

from hypertrain.data import (
    Dataset,
    assign_round,
    derive_assignment_key,
    iter_samples,
    verify_sample,
)
from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.trainer.presets import proxy
from hypertrain.trainer.segment import TrainConfig, run_round
from hypertrain.trainer.state import init_state
from tests.data.conftest import SEQ_LEN


@pytest.mark.slow
def test_proxy_model_trains_on_its_assigned_samples(dataset: Dataset) -> None:
    d = dataset.descriptor
    model = proxy(d.vocab_size)
    config = TrainConfig(
        model=model,
        inner=InnerOptimSpec(lr=3e-3, warmup_steps=0, total_steps=100),
        layout=LayoutSpec(micro_batch_size=2),
        seq_len=SEQ_LEN,
        inner_steps=4,
        checkpoint_interval=2,
    )
    key = derive_assignment_key("integration", 0, bytes(range(32)))
    budget = config.inner_steps * config.samples_per_step
    roster = [("island-a", budget), ("island-b", budget)]
    assignment = assign_round(key, roster, dataset.split(), None)
    ids = assignment.for_hotkey("island-a")
    for sid in ids[:3]:  # what an auditor does with a served sample
        verify_sample(dataset.root, sid, dataset.sample(sid), dataset.proof(sid))
    samples = list(iter_samples(dataset, ids))
    start = init_state(config.state_config(), seed=0)
    result = run_round(start, config, samples)
    assert len(result.leaves) == 3
    assert result.losses[-1] < result.losses[0]
