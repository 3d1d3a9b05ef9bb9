"""The public inputs of an island's round (``hypertrain.evidence.inputs``): each island's
budget, the part of the round a segment trains on, and the start model taken only at the
hash its round-open record names."""

from __future__ import annotations

import pytest
import torch

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import (
    fetch_start_params,
    iter_round_assignments,
    round_sample_ids,
    samples_per_round,
    segment_samples,
)
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.blob import blob_hash, encode_model_blob
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import get_preset, with_vocab
from tests.challenge.helpers import MICRO_BATCH_SIZE, manifest_doc
from tests.trainer.conftest import make_config

MANIFEST = RunManifest.model_validate(manifest_doc())  # H = 8 steps, micro-batches of 5


class Blobs(dict[str, bytes]):
    """Bytes by SHA-256 key, answered whatever they hash to (a relay that may lie)."""

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:  # type: ignore[override]
        return self[sha256]


def _opened(index: int, start_sha256: str = "aa" * 32) -> RoundOpen:
    return RoundOpen(
        round=index, start_model_sha256=start_sha256, start_model_url="u", beacon_round=1,
        assignment_key="ab" * 32, roster=[], commit_deadline_round=5,
    )  # fmt: skip


def test_an_islands_budget_is_h_steps_of_its_layouts_samples() -> None:
    assert samples_per_round(MANIFEST) == 8 * MICRO_BATCH_SIZE  # the manifest's 1 x 1 layout
    wide = LayoutSpec(dp_ranks=2, micro_batches=3, micro_batch_size=MICRO_BATCH_SIZE)
    assert samples_per_round(MANIFEST, wide) == 8 * 2 * 3 * MICRO_BATCH_SIZE


def test_segments_split_the_round_in_its_order() -> None:
    config = make_config(steps=6, interval=2)  # three segments of two steps
    ids = list(range(config.inner_steps * config.samples_per_step))
    parts = [list(segment_samples(ids, config, k)) for k in range(3)]
    per_segment = 2 * config.samples_per_step
    assert [len(p) for p in parts] == [per_segment] * 3
    assert [i for part in parts for i in part] == ids  # disjoint, complete, in order
    assert list(segment_samples(ids, config, 3)) == []  # no fourth segment


def test_round_open_records_must_be_rounds_0_to_w_in_order() -> None:
    for opens in ([], [_opened(1)], [_opened(0), _opened(2)]):
        with pytest.raises(VerificationError, match=r"rounds 0\.\.w in order"):
            round_sample_ids(MANIFEST, None, opens, "hk")  # type: ignore[arg-type]
    with pytest.raises(VerificationError, match=r"consecutive rounds in order"):
        next(iter_round_assignments(MANIFEST, None, [_opened(1), _opened(0)]))  # type: ignore[arg-type]
    with pytest.raises(VerificationError, match=r"needs the epoch state before it"):
        next(iter_round_assignments(MANIFEST, None, [_opened(1)]))  # type: ignore[arg-type]


def test_the_start_model_is_taken_only_at_its_hash() -> None:
    params = init_params(MANIFEST.model, seed=1)
    blob = encode_model_blob(params, MANIFEST.model)
    sha = blob_hash(blob)
    data, got = fetch_start_params(Blobs({sha: blob}), _opened(0, sha), MANIFEST)
    assert data == blob and set(got) == set(params)
    assert all(torch.equal(got[name], params[name]) for name in params)
    other = encode_model_blob(init_params(MANIFEST.model, seed=2), MANIFEST.model)
    with pytest.raises(VerificationError, match="start model of round 0"):
        fetch_start_params(Blobs({sha: other}), _opened(0, sha), MANIFEST)  # other bytes
    bigger = with_vocab(get_preset("tiny"), 64)  # another model: its blob, at its own hash
    foreign = encode_model_blob(init_params(bigger, seed=1), bigger)
    with pytest.raises(VerificationError, match="start model of round 0"):
        fetch_start_params(
            Blobs({blob_hash(foreign): foreign}), _opened(0, blob_hash(foreign)), MANIFEST
        )
