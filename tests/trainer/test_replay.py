from __future__ import annotations

import pytest

from hypertrain.protocol.manifest import DataSpec, RoundSpec, RunManifest
from hypertrain.trainer.checkpoint import encode_checkpoint
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.errors import CheckpointError, DeterminismError
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import TrainConfig, replay_segment, run_round
from hypertrain.trainer.state import TrainState, init_state
from tests.trainer.conftest import SEQ_LEN, make_config, make_samples


def _manifest() -> RunManifest:
    cfg = make_config(layout=(2, 1, 2))
    return RunManifest(
        run_id="replay-test",
        seed=9,
        model=PRESETS["tiny"],
        inner=cfg.inner,
        round=RoundSpec(inner_steps=4, checkpoint_interval=2, layout=cfg.layout),
        data=DataSpec(
            dataset_root="0" * 64,
            descriptor_sha256="1" * 64,
            tokenizer_sha256="2" * 64,
            sample_count=1000,
            seq_len=SEQ_LEN,
        ),
        determinism=configure_determinism(1),
    )


def test_auditor_replay_matches_the_committed_leaf() -> None:
    manifest = _manifest()
    config = TrainConfig.from_manifest(manifest)
    samples = make_samples(16)
    saved: dict[int, TrainState] = {}
    result = run_round(
        init_state(config.state_config(), manifest.seed),
        config,
        samples,
        on_checkpoint=saved.__setitem__,
    )
    local = configure_determinism(1)
    ckpt = encode_checkpoint(saved[1])
    end = replay_segment(manifest, ckpt, result.leaves[1], samples[8:16], local=local, segment=1)
    assert end == result.leaves[2]
    with pytest.raises(CheckpointError, match="expected"):
        replay_segment(manifest, ckpt, result.leaves[0], samples[8:16], local=local)
    other = local.model_copy(update={"num_threads": 3})
    with pytest.raises(DeterminismError):
        replay_segment(manifest, ckpt, result.leaves[1], samples[8:16], local=other)
