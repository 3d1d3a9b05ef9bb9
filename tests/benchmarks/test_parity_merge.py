"""The parity simulator runs the product's round, bit for bit: its merge is the
aggregator's, M islands on identical data are one island, and the new-run recipe's first
round (``hypertrain run init``'s manifest) is a round built by hand from the same state."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks")]

import parity_identity  # noqa: E402
import parity_round  # noqa: E402
import parity_sim  # noqa: E402
from hypertrain.aggregator.blobs import MemoryBlobs  # noqa: E402
from hypertrain.aggregator.combine import Combined  # noqa: E402
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge  # noqa: E402
from hypertrain.aggregator.norms import update_norm  # noqa: E402
from hypertrain.aggregator.outer import encode_outer_state  # noqa: E402
from hypertrain.aggregator.screen import proven_history  # noqa: E402
from hypertrain.aggregator.tape import Candidate, Tape  # noqa: E402
from hypertrain.cli import main  # noqa: E402
from hypertrain.data import Dataset  # noqa: E402
from hypertrain.data.descriptor import DESCRIPTOR_NAME  # noqa: E402
from hypertrain.evidence.genesis import genesis_blob  # noqa: E402
from hypertrain.evidence.inputs import load_samples  # noqa: E402
from hypertrain.ops.manifest import RunOptions, build_manifest  # noqa: E402
from hypertrain.protocol.manifest import RunManifest, SparseSpec  # noqa: E402
from hypertrain.protocol.recipe import OUTER_STEP, WARM_START_PERCENT  # noqa: E402
from hypertrain.trainer.blob import blob_hash, decode_model_blob, encode_model_blob  # noqa: E402
from hypertrain.trainer.codec import decode_quantized, encode_quantized  # noqa: E402
from hypertrain.trainer.determinism import configure_determinism  # noqa: E402
from hypertrain.trainer.model import param_shapes  # noqa: E402
from hypertrain.trainer.presets import PRESETS  # noqa: E402
from hypertrain.trainer.round_config import island_train_config  # noqa: E402
from hypertrain.trainer.segment import Sample, run_segment  # noqa: E402
from hypertrain.trainer.start_state import reset_state  # noqa: E402
from hypertrain.trainer.state import TrainState  # noqa: E402
from hypertrain.trainer.update import build_update, encode_update, next_round_state  # noqa: E402

SEQ = 17
OUTER = {  # outer lr, momentum, int8 broadcast
    "avg-broadcast": (1.0, 0.0, True),
    "nesterov": (0.7, 0.9, False),
}


@pytest.fixture(scope="module")
def setup() -> parity_sim.Setup:
    configure_determinism(1)
    return parity_sim.Setup(
        model=PRESETS["tiny"], seq_len=SEQ, batch_per_island=2, steps=20, lr=3e-3,
        warmup_steps=2, muon_lr=0.02, sparse=SparseSpec(chunk_size=64, topk_per_chunk=4),
        eval_every=5,
    )  # fmt: skip


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    windows = np.random.default_rng(5).integers(0, 64, size=(400, SEQ), dtype=np.int64)
    return {"windows": windows, "heldout": torch.from_numpy(windows[:8].copy())}


def _candidates(blobs: MemoryBlobs, updates: list[bytes], tokens: list[int]) -> list[Candidate]:
    return [
        Candidate(hotkey=parity_round.island_key(i), update_sha256=blobs.put(u, kind="update",
                  round=0), tokens=t, update_bytes=len(u), seq=i)
        for i, (u, t) in enumerate(zip(updates, tokens, strict=True))
    ]  # fmt: skip


def _assert_same(sim: Combined, agg: MergeResult, manifest: RunManifest, r: int) -> None:
    """The simulator's merge wrote the aggregator's model, momentum, broadcast and tape."""
    spec = manifest.model
    assert blob_hash(encode_model_blob(sim.params, spec)) == agg.tape.new_model_sha256
    assert encode_outer_state(sim.momentum, spec, r) == agg.outer_blob
    assert sim.broadcast == agg.broadcast_blob
    assert (manifest.outer.broadcast is None) == (sim.broadcast is None)
    assert sim.selection.included == agg.tape.included and sim.selection.included
    assert sorted(sim.selection.excluded, key=lambda e: e.hotkey) == agg.tape.excluded


def _outlier(manifest: RunManifest, like: bytes) -> bytes:
    """An update three times as long as ``like`` (once encoded), in a direction of its
    own: the norm clip scales it down."""
    shapes = param_shapes(manifest.model)
    gen = torch.Generator().manual_seed(1)
    noise = {k: torch.randn(shape, generator=gen) for k, shape in shapes}
    unit = update_norm(encode_update(noise, manifest.compression), shapes, manifest.compression)
    scale = 3.0 * update_norm(like, shapes, manifest.compression) / unit
    return encode_update({k: v * scale for k, v in noise.items()}, manifest.compression)


@pytest.mark.parametrize("codec", ["int8", "sparse"])
@pytest.mark.parametrize("outer", sorted(OUTER))
def test_the_simulators_merge_is_the_aggregators(
    setup: parity_sim.Setup, data: dict[str, Any], outer: str, codec: Literal["int8", "sparse"]
) -> None:
    """Two rounds of four islands: each round's merge in the simulator equals the
    aggregator's ``merge`` (tape, model, momentum, broadcast), and so does its merge of
    the same updates with a fifth that the norm clip scales down."""
    lr, momentum, broadcast = OUTER[outer]
    cell = parity_sim.Cell("a", "diloco", 4, 4, lr, momentum, codec=codec, broadcast=broadcast)
    manifest = parity_sim.cell_manifest(setup, cell, 0)
    order = np.random.default_rng(0).permutation(len(data["windows"]))
    d = parity_sim.Data(data["windows"], data["heldout"], order)
    swarm = parity_round.start_swarm(parity_sim.genesis_state(manifest, cell, d), 4)
    blobs = MemoryBlobs()
    start = blobs.put(encode_model_blob(swarm.params, manifest.model), kind="model", round=0)
    prev_outer: str | None = None
    tapes: list[Tape] = []
    for r in range(2):
        samples = parity_sim.island_samples(manifest, 4, d, r)
        nxt, log = parity_round.diloco_round(manifest, swarm, samples, r)
        assert log.merge is not None
        tokens = [4 * 2 * (SEQ - 1)] * 4
        history = proven_history(reversed(tapes))
        keys = [parity_round.island_key(i) for i in range(5)]
        cands = _candidates(blobs, list(log.updates), tokens)
        inputs = MergeInputs(manifest, r, start, prev_outer, cands, history_norms=history,
                             proven=keys[:4])  # fmt: skip
        agg = merge(inputs, blobs)
        _assert_same(log.merge, agg, manifest, r)
        assert blob_hash(encode_model_blob(nxt.params, manifest.model)) == agg.tape.new_model_sha256
        given = [*log.updates, _outlier(manifest, log.updates[0])]
        sim = parity_round.merge_updates(
            manifest, swarm.params, swarm.momentum, given, [*tokens, tokens[0]], swarm.merges
        )
        cands = _candidates(blobs, given, [*tokens, tokens[0]])
        inputs = MergeInputs(manifest, r, start, prev_outer, cands, history_norms=history,
                             proven=keys)  # fmt: skip
        clipped = merge(inputs, blobs)
        _assert_same(sim, clipped, manifest, r)
        factors = {i.hotkey: i.clip_factor for i in clipped.tape.included}
        assert factors[keys[4]] < 1.0 == factors[keys[0]]
        tapes.append(agg.tape)
        start = blobs.put(agg.model_blob, kind="model", round=r)
        prev_outer = blobs.put(agg.outer_blob, kind="outer_state", round=r)
        swarm = nxt


@pytest.mark.parametrize("policy", ["reset", "carry"])
def test_identical_islands_are_one_island(
    setup: parity_sim.Setup, data: dict[str, Any], policy: Literal["carry", "reset"]
) -> None:
    """Three islands on identical data, through the aggregator's merge (plain averaging,
    the int8 broadcast), follow one island's trajectory bit for bit under either policy."""
    cell = parity_identity.recipe_cell(policy)
    check = parity_identity.identical_islands(setup, data, 3, cell)
    assert check["holds"], (check["left"], check["right"])
    assert len(check["left"]["curve"]) == 4  # every round of H = 5 in 20 steps


@pytest.fixture(scope="module")
def recipe(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[RunManifest, Dataset, RunManifest]:
    """``hypertrain run init``'s manifest (the tiny preset, H = 4, J = 2, 9 rounds) on a
    dataset prepared with the operator's commands, the dataset, and the same manifest with
    a 1 % warm start (``--warm-start-percent 1``)."""
    tmp = tmp_path_factory.mktemp("recipe")
    corpus, tok, out = tmp / "corpus.txt", tmp / "tokenizer.json", tmp / "dataset"
    corpus.write_bytes((ROOT / "tests/assets/tinyshakespeare.txt").read_bytes()[:20_000])
    assert main(["data", "train-tokenizer", str(corpus), "--vocab-size", "260",
                 "--out", str(tok)]) == 0  # fmt: skip
    assert main(["data", "prepare", str(corpus), "--tokenizer", str(tok), "--seq-len", "16",
                 "--out", str(out)]) == 0  # fmt: skip
    opts = RunOptions(run_id="recipe", preset="tiny", dataset_dir=out, inner_steps=4,
                      checkpoint_interval=2, rounds=9, local=True)  # fmt: skip
    manifest = RunManifest.model_validate(build_manifest(opts))
    warm = RunManifest.model_validate(build_manifest(replace(opts, warm_start_percent=1)))
    return manifest, Dataset(out / DESCRIPTOR_NAME), warm


def _by_hand(
    manifest: RunManifest, start: TrainState, samples: list[list[Sample]]
) -> tuple[dict[str, torch.Tensor], bytes | None, list[TrainState]]:
    """Round 0 from ``start`` written out: each island's H steps and update (at the run's
    width), their plain average, the broadcast of the step at its width, each island's
    next start state."""
    cfg = island_train_config(manifest, 0)
    h, block = manifest.round.inner_steps, manifest.compression.block_size
    ends = [run_segment(start, cfg, s, h) for s in samples]
    ups = [build_update(start.params(), end, manifest.compression) for end in ends]
    u0, u1 = (decode_quantized(u.data) for u in ups)
    half = torch.tensor(0.5, dtype=torch.float32)
    model = {k: v - (u0[k] * half + u1[k] * half) for k, v in start.params().items()}
    broadcast = None
    bits = manifest.outer.broadcast_bits
    if bits is not None:
        delta = {k: v - model[k] for k, v in start.params().items()}
        broadcast = encode_quantized(delta, block, bits, manifest.compression.entropy)
        step = decode_quantized(broadcast)
        model = {k: v - step[k] for k, v in start.params().items()}
    if manifest.inner.state_policy == "reset":
        nxt = island_train_config(manifest, 1)
        first = reset_state(nxt.state_config(), model, nxt.round_start_step(1))
        return model, broadcast, [first, first]
    return (
        model,
        broadcast,
        [next_round_state(e, model, u.residual) for e, u in zip(ends, ups, strict=True)],
    )


@pytest.mark.parametrize("policy", ["recipe", "reset", "carry", "warm1"])
def test_the_recipes_first_round_is_a_round_built_by_hand(
    recipe: tuple[RunManifest, Dataset, RunManifest], policy: str
) -> None:
    """Round 0 of the new-run recipe (its warm start if it has one, plain averaging and
    the broadcast, under the recipe's inner state policy and under each one, and with a
    1 % warm start) in the simulator equals the same round written out by hand, from the
    same start state, bit for bit."""
    shipped, dataset, warm = recipe
    if policy == "warm1":
        shipped = warm
    inner = shipped.inner if policy in ("recipe", "warm1") else shipped.inner.model_copy(
        update={"state_policy": policy})  # fmt: skip
    manifest = shipped.model_copy(update={"inner": inner})
    assert (manifest.warm_start is not None) == (policy == "warm1" or WARM_START_PERCENT > 0)
    assert (manifest.first_round_step > 0) == (manifest.warm_start is not None)
    assert (manifest.outer.lr, manifest.outer.momentum) == (
        OUTER_STEP["lr"],
        OUTER_STEP["momentum"],
    )
    genesis = decode_model_blob(genesis_blob(manifest, dataset), manifest.model)
    cfg = island_train_config(manifest, 0)
    start = reset_state(cfg.state_config(), genesis, cfg.round_start_step(0))
    assert start.step == manifest.first_round_step
    per_island = manifest.round.inner_steps * cfg.samples_per_step
    ids = dataset.split().train_ids(np.arange(2 * per_island))
    samples = [load_samples(dataset, [int(i) for i in ids[k * per_island:(k + 1) * per_island]])
               for k in range(2)]  # fmt: skip
    swarm, log = parity_round.diloco_round(manifest, parity_round.start_swarm(start, 2), samples, 0)
    model, broadcast, states = _by_hand(manifest, start, samples)
    assert log.merge is not None
    assert [(i.weight, i.clip_factor) for i in log.merge.selection.included] == [(0.5, 1.0)] * 2
    assert log.merge.broadcast == broadcast
    spec = manifest.model
    assert encode_model_blob(swarm.params, spec) == encode_model_blob(model, spec)
    assert [s.state_hash() for s in swarm.states] == [s.state_hash() for s in states]
