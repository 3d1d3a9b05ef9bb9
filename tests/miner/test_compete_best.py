"""``hypertrain-miner compete best``: the current winner, verified, loadable offline.

The real competition service runs in process on a stepped beacon (tests/competition/world.py's
world); the model lies on the project's relay under uvicorn on loopback (or on a
loopback server that lies about its bytes); the downloaded directory is loaded by
``transformers`` with the hub switched off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.api.competition import CompetitionClient
from hypertrain.competition.submission import ModelFile, commitment, list_directory, model_hash
from hypertrain.miner.best import BestModelMismatchError, NoBestModelError, download_best
from hypertrain.miner.errors import MinerError
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.client import RelayClient
from tests.competition.models import tiny_llama
from tests.competition.world import CID, MINERS, World, world
from tests.evaluator.blob_server import serve_blobs, servers
from tests.relay import conftest as _relays
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys

__all__ = ["servers", "world"]  # the real competition service, loopback blob servers
keys, clock, serve, relay = _relays.keys, _relays.clock, _relays.serve, _relays.relay
PAGES = 4


def enter(w: World, key: Hotkey, files: list[ModelFile], base_url: str) -> str:
    """Commit, reveal after the commit's round, and settle one cycle that pays it."""
    sha = model_hash(files)
    commit = {"commitment": commitment(sha, key.ss58_address)}
    assert w.post("/v1/compete/commit", key, "compete-commit", commit).status_code == 200
    w.tick()
    reveal = {"model_sha256": sha, "files": [f.model_dump() for f in files], "base_url": base_url}
    assert w.post("/v1/compete/reveal", key, "compete-reveal", reveal).status_code == 200
    w.tick(4)  # cycle 0 opens at round start + 5
    assert w.score(sha, [2.0] * PAGES).status_code == 200
    w.tick()
    return sha


def upload(relay: Running, keys: Keys, folder: Path) -> list[ModelFile]:
    files = list_directory(folder)
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        for f in files:
            client.put(folder / f.name, kind="model", round=1001, expiry_round=1050)
    return files


def test_the_best_model_is_verified_and_loads_offline(
    world: World, relay: Running, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = tiny_llama(tmp_path / "entry")
    sha = enter(world, MINERS[0], upload(relay, keys, tmp_path / "entry"), relay.url)
    got = download_best(CompetitionClient("", http=world.client), CID, tmp_path / "best")
    assert (got.hotkey, got.model_sha256, got.cycle) == (MINERS[0].ss58_address, sha, 0)
    assert model_hash(list_directory(tmp_path / "best")) == sha
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import transformers

    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "best").eval()
    ids = torch.arange(16).reshape(1, 16)
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, original(input_ids=ids).logits)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".best-")]  # no staging left


def test_no_settled_cycle_means_no_best_model(world: World, tmp_path: Path) -> None:
    with pytest.raises(NoBestModelError, match="no settled cycle yet"):
        download_best(CompetitionClient("", http=world.client), CID, tmp_path / "best")
    assert not (tmp_path / "best").exists()


def test_bytes_that_are_not_the_committed_ones_are_refused(
    world: World, servers: list[Any], tmp_path: Path
) -> None:
    tiny_llama(tmp_path / "entry")
    files = list_directory(tmp_path / "entry")
    blobs = {f.sha256: (tmp_path / "entry" / f.name).read_bytes() for f in files}
    weights = next(f for f in files if f.name == "model.safetensors")
    blobs[weights.sha256] = blobs[weights.sha256][:-4] + b"\x00\x00\x80\x7f"  # one float: inf
    server = serve_blobs(servers, blobs)
    enter(world, MINERS[1], files, server.url)
    with pytest.raises(BestModelMismatchError, match=r"model\.safetensors.*hash_mismatch"):
        download_best(CompetitionClient("", http=world.client), CID, tmp_path / "best")
    assert not (tmp_path / "best").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".best-")]


def test_a_relay_that_is_down_is_a_clear_error(
    world: World, relay: Running, keys: Keys, tmp_path: Path
) -> None:
    tiny_llama(tmp_path / "entry")
    enter(world, MINERS[2], upload(relay, keys, tmp_path / "entry"), relay.url)
    relay.stop()
    with pytest.raises(MinerError, match=r"could not be fetched from .*unreachable"):
        download_best(CompetitionClient("", http=world.client), CID, tmp_path / "best")
    assert not (tmp_path / "best").exists()


def test_a_non_empty_target_is_refused(world: World, tmp_path: Path) -> None:
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "keep.txt").write_text("mine")
    with pytest.raises(MinerError, match="not an empty directory"):
        download_best(CompetitionClient("", http=world.client), CID, tmp_path / "best")
    assert (tmp_path / "best" / "keep.txt").read_text() == "mine"
