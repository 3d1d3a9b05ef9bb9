"""Held-out loss of a merged model: the fixed slice, the figure, and bad datasets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hypertrain.aggregator.errors import AggregatorError
from hypertrain.aggregator.heldout import EVAL_SAMPLES, heldout_batch, heldout_loss, open_heldout
from hypertrain.data import PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.model import init_params, loss_fn
from tests.auditor.world import World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("heldout"))


def test_the_slice_is_the_first_heldout_samples(world: World) -> None:
    batch = open_heldout(world.dataset_dir, world.manifest)
    split = world.dataset.split()
    ids = [int(i) for i in split.heldout_ids[:EVAL_SAMPLES]]
    assert batch.shape == (len(ids), world.dataset.seq_len) and batch.dtype == torch.int64
    assert all(split.is_heldout(i) for i in ids)
    for row, i in zip(batch, ids, strict=True):
        assert row.tolist() == world.dataset.sample(i).tolist()


def test_loss_is_plain_cross_entropy_and_deterministic(world: World) -> None:
    batch = open_heldout(world.dataset_dir, world.manifest)
    params = init_params(world.manifest.model, world.manifest.seed)
    loss = heldout_loss(params, world.manifest, batch)
    assert loss == heldout_loss(params, world.manifest, batch)
    with torch.no_grad():
        assert loss == pytest.approx(float(loss_fn(params, world.manifest.model, batch)), abs=1e-6)
    vocab = world.manifest.model.vocab_size
    assert abs(loss - float(torch.log(torch.tensor(float(vocab))))) < 1.0  # a fresh model


def test_a_dataset_that_is_not_the_runs_is_refused(world: World, tmp_path: Path) -> None:
    other = world.manifest.model_dump(mode="json")
    other["data"]["descriptor_sha256"] = "0" * 64
    with pytest.raises(AggregatorError, match="dataset"):
        open_heldout(world.dataset_dir, RunManifest.model_validate(other))
    with pytest.raises(AggregatorError, match="dataset"):
        open_heldout(tmp_path / "missing", world.manifest)


def test_a_dataset_without_heldout_samples_is_refused(assets_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_bytes((assets_dir / "tinyshakespeare.txt").read_bytes()[:4000])
    tok = tokenizer_from_bytes(train_tokenizer([corpus], 300))
    prepare([corpus], tok, 16, tmp_path / "d", PrepareOptions(heldout_fraction=0.0))
    with pytest.raises(AggregatorError, match="no held-out samples"):
        heldout_batch(Dataset(tmp_path / "d" / DESCRIPTOR_NAME))
