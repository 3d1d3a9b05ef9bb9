"""The island's start model: rebuilt from a real merge's broadcast, or downloaded in full.

The merge, the blobs and the model bytes are real; the service and the relay are tiny
hand-written stand-ins holding those bytes (a round detail with the signed merge body,
a content-addressed blob map).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.rebase import rollback
from hypertrain.evidence.genesis import genesis_blob
from hypertrain.miner.start_model import START_MODEL_FILE, derived_genesis, fetch_start_model
from hypertrain.protocol.manifest import WarmStartSpec
from hypertrain.protocol.messages import MergeTape
from hypertrain.trainer.blob import blob_hash, decode_model_blob
from tests.aggregator.helpers import HOTKEYS, World


class _Relay:
    def __init__(self, blobs: dict[str, bytes]) -> None:
        self.blobs, self.got = blobs, []  # type: list[str]

    def get(self, sha256: str, *, max_bytes: int = 1 << 32) -> bytes:
        self.got.append(sha256)
        data = self.blobs[sha256]
        assert hashlib.sha256(data).hexdigest() == sha256 and len(data) <= max_bytes
        return data


def _setup(tmp_path: Path, broadcast: bytes | None = None) -> tuple[Any, _Relay, list[Any], Any]:
    w = World(broadcast="int8")
    for i in range(3):
        w.add(i, tokens=50 + 40 * i)
    result = merge(w.inputs(), w.blobs)
    data = result.broadcast_blob if broadcast is None else broadcast
    assert data is not None
    blobs = {hashlib.sha256(b).hexdigest(): b for b in (result.model_blob, data)}
    blobs[w.start_sha] = w.blobs.get(w.start_sha)
    body = {
        "start_model_sha256": w.start_sha,
        "new_model_sha256": result.tape.new_model_sha256,
        "broadcast_sha256": hashlib.sha256(data).hexdigest(),
    }
    tape = {**body, "round": 0, "new_model_url": "u", "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32}  # fmt: skip
    detail = SimpleNamespace(
        merge=SimpleNamespace(body=tape), current_merge=lambda: MergeTape.model_validate(tape)
    )
    events: list[tuple[str, dict[str, Any]]] = []
    ctx = SimpleNamespace(
        manifest=w.manifest,
        config=SimpleNamespace(round_dir=lambda i: tmp_path / f"round-{i}"),
        service=SimpleNamespace(round_detail=lambda run_id, index: detail),
        events=events,
    )
    records = [
        SimpleNamespace(round=0, start_model_sha256=w.start_sha),
        SimpleNamespace(round=1, start_model_sha256=result.tape.new_model_sha256),
    ]
    reporter = SimpleNamespace(event=lambda name, **kw: events.append((name, kw)))
    return ctx, _Relay(blobs), records, (reporter, result)


def _hold_round_zero(ctx: Any, relay: _Relay, records: list[Any], reporter: Any) -> None:
    fetch_start_model(ctx, relay, records[:1], reporter)  # round 0: a full download, kept
    assert (ctx.config.round_dir(0) / START_MODEL_FILE).is_file()


def test_an_island_that_trained_the_last_round_rebuilds_from_the_broadcast(
    tmp_path: Path,
) -> None:
    ctx, relay, records, (reporter, result) = _setup(tmp_path)
    _hold_round_zero(ctx, relay, records, reporter)
    params = fetch_start_model(ctx, relay, records, reporter)
    expected = decode_model_blob(result.model_blob, ctx.manifest.model)
    assert all(torch.equal(params[n], expected[n]) for n in expected)
    assert ctx.events[-1] == ("start_model", {"round": 1, "source": "broadcast"})
    assert result.tape.new_model_sha256 not in relay.got  # the model itself never moved
    kept = (ctx.config.round_dir(1) / START_MODEL_FILE).read_bytes()
    assert kept == result.model_blob
    assert not (ctx.config.round_dir(0) / START_MODEL_FILE).exists()


def test_a_tampered_broadcast_is_refused_and_the_model_downloaded(tmp_path: Path) -> None:
    ctx, relay, records, (reporter, result) = _setup(tmp_path)
    good = result.broadcast_blob
    assert good is not None
    tampered = bytearray(good)
    tampered[-1] = (tampered[-1] + 1) % 127
    ctx, relay, records, (reporter, result) = _setup(tmp_path, bytes(tampered))
    _hold_round_zero(ctx, relay, records, reporter)
    params = fetch_start_model(ctx, relay, records, reporter)
    names = [name for name, _ in ctx.events]
    assert names[-2:] == ["broadcast_refused", "start_model"]
    assert "the merge tape says" in ctx.events[-2][1]["reason"]
    assert ctx.events[-1][1]["source"] == "download"
    expected = decode_model_blob(result.model_blob, ctx.manifest.model)
    assert all(torch.equal(params[n], expected[n]) for n in expected)


def test_an_island_without_the_previous_model_downloads_it(tmp_path: Path) -> None:
    ctx, relay, records, (reporter, result) = _setup(tmp_path)
    fetch_start_model(ctx, relay, records, reporter)  # joined at round 1: nothing held
    assert ctx.events[-1][1]["source"] == "download"
    assert result.tape.new_model_sha256 in relay.got


@pytest.mark.parametrize("field", ["start_model_sha256", "new_model_sha256"])
def test_a_broadcast_for_other_models_is_not_used(tmp_path: Path, field: str) -> None:
    ctx, relay, records, (reporter, _) = _setup(tmp_path)
    _hold_round_zero(ctx, relay, records, reporter)
    detail = ctx.service.round_detail("run-1", 0)
    detail.merge.body[field] = "ab" * 32
    fetch_start_model(ctx, relay, records, reporter)
    assert ctx.events[-1][1]["source"] == "download"


def test_a_rolled_back_round_moves_the_island_to_the_corrected_model(tmp_path: Path) -> None:
    """The next round opens on the corrected model; the round's current tape is the
    correction, whose broadcast rebuilds it from the start model the island holds."""
    ctx, relay, records, (reporter, result) = _setup(tmp_path)
    w = World(broadcast="int8")
    for i in range(3):
        w.add(i, tokens=50 + 40 * i)
    w.blobs.put(result.model_blob, kind="model", round=0)
    fixed = rollback(result.tape, HOTKEYS[1], w.blobs)
    assert fixed.broadcast_blob is not None and fixed.model_blob != result.model_blob
    for blob in (fixed.model_blob, fixed.broadcast_blob):
        relay.blobs[hashlib.sha256(blob).hexdigest()] = blob
    corrected = {"round": 0, "start_model_sha256": w.start_sha, "new_model_url": "u",
                 "new_model_sha256": fixed.tape.new_model_sha256, "outer_state_sha256": "cc" * 32,
                 "tape_sha256": "ee" * 32,
                 "broadcast_sha256": hashlib.sha256(fixed.broadcast_blob).hexdigest()}  # fmt: skip
    ctx.service.round_detail("run-1", 0).current_merge = lambda: MergeTape.model_validate(corrected)
    records[1].start_model_sha256 = fixed.tape.new_model_sha256
    _hold_round_zero(ctx, relay, records, reporter)
    params = fetch_start_model(ctx, relay, records, reporter)
    assert ctx.events[-1] == ("start_model", {"round": 1, "source": "broadcast"})
    expected = decode_model_blob(fixed.model_blob, ctx.manifest.model)
    assert all(torch.equal(params[n], expected[n]) for n in expected)
    # an island that still holds the superseded round-1 model downloads the corrected one
    ctx2, relay2, records2, (reporter2, _) = _setup(tmp_path / "late")
    relay2.blobs.update(relay.blobs)
    records2[1].start_model_sha256 = fixed.tape.new_model_sha256
    _hold_round_zero(ctx2, relay2, records2, reporter2)
    got = fetch_start_model(ctx2, relay2, records2, reporter2)
    assert ctx2.events[-1] == ("start_model", {"round": 1, "source": "download"})
    assert all(torch.equal(got[n], expected[n]) for n in expected)


def test_round_zero_without_a_warm_start_is_computed_not_downloaded(tmp_path: Path) -> None:
    """Round 0's start model of a run without a warm start is the seed's initial
    parameters: the island computes it, and downloads only what it cannot (a run with a
    warm start, a later round, a record naming other bytes)."""
    ctx, relay, _, (reporter, _) = _setup(tmp_path)
    genesis = genesis_blob(ctx.manifest)
    sha = blob_hash(genesis)
    relay.blobs[sha] = genesis
    zero = SimpleNamespace(round=0, start_model_sha256=sha)
    params = fetch_start_model(ctx, relay, [zero], reporter)
    assert ctx.events[-1] == ("start_model", {"round": 0, "source": "derived"})
    assert relay.got == []  # nothing moved
    expected = decode_model_blob(genesis, ctx.manifest.model)
    assert all(torch.equal(params[n], expected[n]) for n in expected)
    assert (ctx.config.round_dir(0) / START_MODEL_FILE).read_bytes() == genesis
    assert derived_genesis(ctx.manifest, SimpleNamespace(round=1, start_model_sha256=sha)) is None
    other = SimpleNamespace(round=0, start_model_sha256=hashlib.sha256(b"x").hexdigest())
    assert derived_genesis(ctx.manifest, other) is None  # not the record's bytes: download
    warm = ctx.manifest.model_copy(
        update={"warm_start": WarmStartSpec(steps=1, samples_per_step=2)}
    )
    assert derived_genesis(warm, zero) is None  # trained by the operator: downloaded
