"""The secret evaluation pool: committed by root, revealed per cycle, never the public data.

A model trained on the public dataset's held-out split (which every miner can read)
beats a stronger honest model when the pages come from that split, as they did
before the pool; on pages revealed from the committed pool it does not win. The
revealed pages verify against the root the signed spec carries, a tampered page
does not, and cycles never reveal a page twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hypertrain.competition.pool import (
    PoolError,
    cycle_positions,
    decode_pool,
    encode_pool,
    load_pool,
    pool_tree,
    verified_pages,
)
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator.scorer import page_batch
from tests.competition import models
from tests.competition.models import Trained


def _losses(trained: Trained, params: dict[str, torch.Tensor], pages: torch.Tensor,
            tmp_path: Path, name: str) -> tuple[float, ...]:  # fmt: skip
    directory = models.export(params, trained.spec, tmp_path / name)
    return models.page_losses_of(directory, trained.dataset, pages)


@pytest.mark.slow
def test_a_model_trained_on_the_public_heldout_split_does_not_win_on_the_pool(
    trained: Trained, tmp_path: Path
) -> None:
    ds = trained.dataset
    heldout = [int(i) for i in ds.split().heldout_ids]
    cheater = trained.public
    pool = models.pool_dataset(trained.dataset_dir.parent, tmp_path / "secret")
    spec = CompetitionSpec.model_validate(models.pool_spec_doc(ds, pool))
    public_pages = page_batch(ds, heldout[:24])
    old = (_losses(trained, trained.strong, public_pages, tmp_path, "h1"),
           _losses(trained, cheater, public_pages, tmp_path, "c1"))  # fmt: skip
    assert models.weight_taker(ds, *old) == "newer"  # the attack, when the public split was scored

    samples = np.stack([pool.sample(i) for i in range(len(pool))])
    tree = pool_tree(samples)
    positions = cycle_positions(spec, "11" * 32, [])
    pages = verified_pages(
        spec, positions, [samples[p].astype("<u4").tobytes().hex() for p in positions],
        [tree.proof(p) for p in positions],
    )  # fmt: skip
    new = (_losses(trained, trained.strong, torch.from_numpy(pages), tmp_path, "h2"),
           _losses(trained, cheater, torch.from_numpy(pages), tmp_path, "c2"))  # fmt: skip
    assert models.weight_taker(ds, *new) == "older"  # the honest model


def _unpinned(trained: Trained) -> dict[str, Any]:
    doc = models.spec_doc(trained.dataset)
    doc["data"] = {k: v for k, v in doc["data"].items() if k not in ("pool_root", "pool_count")}
    return doc


def test_revealed_pages_verify_and_tampered_ones_do_not(trained: Trained, tmp_path: Path) -> None:
    pool = models.pool_dataset(trained.dataset_dir.parent, tmp_path / "secret")
    doc, encoded = load_pool(_unpinned(trained), tmp_path / "secret" / "pool")
    spec = CompetitionSpec.model_validate(doc)
    samples = decode_pool(encoded, spec)
    assert len(samples) == len(pool)
    tree = pool_tree(samples)
    positions = cycle_positions(spec, "22" * 32, [])
    hexes = [samples[p].astype("<u4").tobytes().hex() for p in positions]
    proofs = [tree.proof(p) for p in positions]
    assert verified_pages(spec, positions, hexes, proofs).shape == (len(positions), 16)
    forged = list(hexes)
    forged[0] = "00000000" + forged[0][8:]
    if forged[0] == hexes[0]:
        forged[0] = "01000000" + forged[0][8:]
    with pytest.raises(PoolError, match="committed pool"):
        verified_pages(spec, positions, forged, proofs)
    with pytest.raises(PoolError, match="committed pool"):
        verified_pages(spec, positions[::-1], hexes, proofs)  # proofs for other positions


def test_a_pool_that_is_not_the_committed_one_is_refused(trained: Trained, tmp_path: Path) -> None:
    models.pool_dataset(trained.dataset_dir.parent, tmp_path / "secret")
    doc, encoded = load_pool(_unpinned(trained), tmp_path / "secret" / "pool")
    good = CompetitionSpec.model_validate(doc)
    wrong = {**doc, "data": {**doc["data"], "pool_root": "ab" * 32}}
    with pytest.raises(PoolError, match="pool_root"):
        decode_pool(encoded, CompetitionSpec.model_validate(wrong))
    with pytest.raises(PoolError, match="not that of the pool"):
        load_pool(wrong, tmp_path / "secret" / "pool")
    with pytest.raises(PoolError, match="must hold"):
        decode_pool(encoded[:-8], good)
    with pytest.raises(PoolError, match="base64"):
        decode_pool("not base64!", good)
    big = np.full((good.data.pool_count, 16), 10_000, dtype=np.uint32)
    with pytest.raises(PoolError, match="vocabulary"):
        decode_pool(encode_pool(big), good)


def test_cycles_never_reveal_a_page_twice(trained: Trained) -> None:
    doc = models.spec_doc(trained.dataset)
    doc["data"] |= {"pool_count": 50, "pages_per_eval": 12}
    spec = CompetitionSpec.model_validate(doc)
    used: list[int] = []
    for cycle in range(4):
        pages = cycle_positions(spec, f"{cycle:02x}" * 32, used)
        assert len(pages) == 12 and not set(pages) & set(used)
        used += pages
    assert cycle_positions(spec, "ff" * 32, used) == []  # 2 left: the pool is spent
