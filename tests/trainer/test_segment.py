from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.checkpoint import decode_checkpoint, encode_checkpoint
from hypertrain.trainer.errors import SampleError, TrainerError
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.optim import clip_grads, optimizer_step
from hypertrain.trainer.segment import TrainConfig, run_round, run_segment, samples_to_batch
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.step import rank_gradient, reduce_gradients, split_batch, train_step
from tests.trainer.conftest import make_config, make_samples

_SCRIPT = """
import json
from hypertrain.trainer.determinism import configure_determinism
from tests.trainer.conftest import make_config, make_samples
from hypertrain.trainer.segment import run_round
from hypertrain.trainer.state import init_state
configure_determinism(1)
out = {}
for name in ("adamw", "muon"):
    cfg = make_config("tiny", layout=(2, 1, 2), steps=4, interval=2, name=name)
    result = run_round(init_state(cfg.state_config(), 5), cfg, make_samples(16))
    out[name] = {"leaves": [x.hex() for x in result.leaves], "root": result.root.hex()}
print(json.dumps(out))
"""


def _round(cfg: TrainConfig, seed: int = 5, samples: list | None = None):  # type: ignore[no-untyped-def, type-arg]
    start = init_state(cfg.state_config(), seed)
    return run_round(start, cfg, samples or make_samples(cfg.inner_steps * cfg.samples_per_step))


def test_two_processes_give_identical_leaves_and_root() -> None:
    root_dir = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            cwd=root_dir,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    first, second = (json.loads(o) for o in outs)
    assert first == second
    for optimizer in ("adamw", "muon"):
        leaves = [bytes.fromhex(x) for x in first[optimizer]["leaves"]]
        assert len(leaves) == 3
        assert MerkleTree.from_leaves(leaves).root.hex() == first[optimizer]["root"]
    assert first["adamw"]["root"] != first["muon"]["root"]


def test_round_commits_leaves_and_tokens() -> None:
    cfg = make_config(steps=4, interval=2)
    result = _round(cfg)
    assert len(result.leaves) == 3 and len(set(result.leaves)) == 3
    assert result.final.step == 4
    assert result.tokens == 4 * 4 * 16
    assert result.root == MerkleTree.from_leaves(result.leaves).root


def test_segment_replay_from_checkpoint_reproduces_the_leaf() -> None:
    cfg = make_config(steps=4, interval=2)
    samples = make_samples(16)
    saved: dict[int, bytes] = {}
    result = run_round(
        init_state(cfg.state_config(), 5),
        cfg,
        samples,
        on_checkpoint=lambda k, s: saved.__setitem__(k, encode_checkpoint(s)),
    )
    start = decode_checkpoint(saved[1], cfg.state_config(), expected_hash=result.leaves[1])
    end = run_segment(start, cfg, samples[8:16], 2, local_step=2)
    assert end.state_hash() == result.leaves[2]
    assert start.state_hash() == result.leaves[1]  # start state not modified


def _flip_one_bit(state: TrainState) -> TrainState:
    tensors = {k: v.clone() for k, v in state.tensors.items()}
    raw = tensors["layers.0.self_attn.q_proj.weight"].view(torch.int32)
    raw.view(-1)[0] ^= 1
    return TrainState(state.step, tensors, state.config_digest)


def test_one_bit_in_start_state_changes_every_leaf() -> None:
    cfg = make_config(steps=2, interval=1)
    start = init_state(cfg.state_config(), 5)
    samples = make_samples(8)
    a = run_round(start, cfg, samples)
    b = run_round(_flip_one_bit(start), cfg, samples)
    assert all(x != y for x, y in zip(a.leaves, b.leaves, strict=True))


def test_one_different_sample_changes_only_later_leaves() -> None:
    cfg = make_config(steps=4, interval=1)
    samples = make_samples(16)
    other = list(samples)
    other[9] = make_samples(1, start_id=1000)[0]  # a different sample id in step 2
    a, b = _round(cfg, samples=samples), _round(cfg, samples=other)
    assert a.leaves[:3] == b.leaves[:3]
    assert a.leaves[3] != b.leaves[3] and a.leaves[4] != b.leaves[4]


def test_learning_rate_changes_the_leaf() -> None:
    a = _round(make_config(steps=2, interval=1, lr=3e-3))
    b = _round(make_config(steps=2, interval=1, lr=2e-3))
    assert a.leaves[0] == b.leaves[0]
    assert a.leaves[1] != b.leaves[1]


@pytest.mark.parametrize("layout", [(1, 4, 1), (2, 2, 1), (4, 1, 1)])
def test_each_layout_reproduces_itself(layout: tuple[int, int, int]) -> None:
    cfg = make_config(layout=layout, steps=2, interval=1)
    assert _round(cfg).leaves == _round(cfg).leaves


def test_layout_result_does_not_depend_on_execution() -> None:
    """Ranks computed concurrently, in reverse order, then reduced in rank order: same bytes."""
    cfg = make_config(layout=(4, 2, 1), steps=1, interval=1)
    samples = make_samples(8)
    start = init_state(cfg.state_config(), 5)
    emulated = run_segment(start, cfg, samples, 1)

    tensors = {k: v.clone() for k, v in start.tensors.items()}
    params = {n: tensors[n] for n, _ in param_shapes(cfg.model)}
    shards = split_batch(samples_to_batch(samples, cfg), cfg.layout)
    with ThreadPoolExecutor(max_workers=1) as pool:
        futures = [pool.submit(rank_gradient, params, cfg.model, mb) for mb in reversed(shards)]
        per_rank = [f.result()[0] for f in reversed(futures)]
    grads = reduce_gradients(per_rank, 8)
    clip_grads(grads, cfg.inner.grad_clip)
    optimizer_step(tensors, grads, 0, cfg.inner)
    manual = TrainState(1, tensors, start.config_digest)
    assert manual.state_hash() == emulated.state_hash()


def test_bad_samples_are_refused() -> None:
    cfg = make_config(steps=1, interval=1)
    start = init_state(cfg.state_config(), 0)
    good = make_samples(4)
    with pytest.raises(SampleError, match="need 4 samples"):
        run_segment(start, cfg, good[:3], 1)
    with pytest.raises(SampleError, match="shape"):
        run_segment(start, cfg, [*good[:3], (9, np.zeros(5, dtype=np.int64))], 1)
    with pytest.raises(SampleError, match="outside"):
        run_segment(start, cfg, [*good[:3], (9, np.full(17, 64))], 1)
    with pytest.raises(SampleError, match="integers"):
        run_segment(start, cfg, [*good[:3], (9, np.zeros(17, dtype=np.float32))], 1)
    with pytest.raises(SampleError, match="round of"):
        run_round(start, cfg, good[:3])


def test_start_state_for_another_config_is_refused() -> None:
    start = init_state(make_config(name="muon").state_config(), 0)
    with pytest.raises(TrainerError, match="another model"):
        run_segment(start, make_config(), make_samples(4), 1)


def test_the_schedule_follows_the_run_global_step() -> None:
    """A fresh state in round 1 trains with the learning rate of global step H, not 0."""
    round0 = make_config(steps=4, interval=2)
    round1 = dataclasses.replace(round0, round_index=1)
    start = init_state(round0.state_config(), 5)
    samples = make_samples(4)
    late = run_segment(start, round1, samples, 1)
    assert late.state_hash() != run_segment(start, round0, samples, 1).state_hash()
    tensors = {k: v.clone() for k, v in start.tensors.items()}
    batch = samples_to_batch(samples, round0)
    train_step(tensors, 0, batch, round0.model, round0.inner, round0.layout, schedule_step=4)
    assert TrainState(1, tensors, start.config_digest).state_hash() == late.state_hash()
