"""Sparse updates with error feedback: two processes agree on every byte, replay matches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from hypertrain.protocol.manifest import CompressionSpec, SparseSpec
from hypertrain.trainer.checkpoint import decode_checkpoint, encode_checkpoint
from hypertrain.trainer.segment import TrainConfig, run_round, run_segment
from hypertrain.trainer.state import RESIDUAL_PREFIX, TrainState, init_state
from hypertrain.trainer.update import build_update, decode_update, next_round_state
from tests.trainer.conftest import make_config, make_samples

SPARSE = CompressionSpec(
    error_feedback=True, sparse=SparseSpec(chunk_size=64, topk_per_chunk=4, value_bits=2)
)

_SCRIPT = """
import json
from hypertrain.trainer.determinism import configure_determinism
from tests.trainer.test_sparse_replay import two_rounds
configure_determinism(1)
print(json.dumps(two_rounds()))
"""


def sparse_config() -> TrainConfig:
    base = make_config("tiny", layout=(2, 1, 2), steps=4, interval=2)
    return TrainConfig(
        model=base.model, inner=base.inner, layout=base.layout, seq_len=base.seq_len,
        inner_steps=4, checkpoint_interval=2, compression=SPARSE,
    )  # fmt: skip


def two_rounds(saved: dict[int, TrainState] | None = None) -> dict[str, list[str]]:
    """Two rounds of one island; the second starts from the first's decoded update."""
    cfg = sparse_config()
    state = init_state(cfg.state_config(), 5)
    out: dict[str, list[str]] = {"leaves": [], "updates": [], "merged": []}
    for r in range(2):
        hook = saved.__setitem__ if saved is not None and r == 1 else None
        result = run_round(state, cfg, make_samples(16, start_id=16 * r), on_checkpoint=hook)
        start = state.params()
        update = build_update(start, result.final, cfg.compression)
        delta = decode_update(update.data, cfg.compression)
        merged = {k: start[k] - torch.mul(delta[k], 0.7) for k in start}
        state = next_round_state(result.final, merged, update.residual)
        out["leaves"] += [x.hex() for x in result.leaves]
        out["updates"].append(update.digest.hex())
        out["merged"].append(state.state_hash().hex())
    return out


def test_two_processes_agree_on_sparse_rounds() -> None:
    root_dir = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SCRIPT], cwd=root_dir, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    first, second = (json.loads(o) for o in outs)
    assert first == second
    assert first == two_rounds()  # and this process agrees too
    assert len(set(first["updates"])) == 2


def test_replay_of_a_sparse_segment_reproduces_the_leaf_and_update() -> None:
    saved: dict[int, TrainState] = {}
    first = two_rounds(saved)
    cfg = sparse_config()
    ckpt = decode_checkpoint(encode_checkpoint(saved[1]), cfg.state_config())
    assert any(bool(ckpt.tensors[RESIDUAL_PREFIX + n].abs().sum() > 0) for n in ckpt.params())
    end = run_segment(ckpt, cfg, make_samples(16, start_id=16)[8:], 2, local_step=2)
    assert end.state_hash().hex() == first["leaves"][-1]
    start = saved[0].params()
    assert build_update(start, end, cfg.compression).digest.hex() == first["updates"][1]
