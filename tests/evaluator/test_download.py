"""A model's download has one deadline: slack plus its declared size at a minimum rate
(``hypertrain.evaluator.download``).

The servers here are real loopback HTTP servers written on raw sockets (blob_server.py),
so a test can choose how slowly they send. A model served at an ordinary pace is fetched;
one whose body or headers trickle is refused with ``fetch_deadline`` before the server has
sent everything, and the next model of the same cycle is still fetched and scored.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pytest

from hypertrain.competition.messages import CycleModel
from hypertrain.competition.submission import (
    ModelFile,
    SubmissionError,
    commitment,
    list_directory,
    model_hash,
)
from hypertrain.evaluator.download import MIB, FetchDeadlineError, FetchLimits, fetch_files
from hypertrain.evaluator.runner import Evaluator, evaluate_open_cycle
from hypertrain.relay.client import RelayClient
from tests.competition.world import CID, EVALUATOR, HEX, MINERS, World, evaluator_of, world
from tests.evaluator.blob_server import BlobServer, serve_blobs, servers
from tests.relay import conftest as _relays
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys

__all__ = ["servers", "world"]  # the fixtures, by name
# the project's relay on loopback, with its fixtures
keys, clock, serve, relay = _relays.keys, _relays.clock, _relays.serve, _relays.relay
TRICKLED = b"\x01" * 16
GAP_S = 0.25  # the hostile pace: one byte every quarter second


def _model_dir(root: Path, weights: bytes) -> list[ModelFile]:
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(weights)
    return list_directory(root)


def _blobs(root: Path) -> dict[str, bytes]:
    return {hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes() for p in root.iterdir()}


def _trickled_files() -> list[ModelFile]:
    digest = hashlib.sha256(TRICKLED).hexdigest()
    return [
        ModelFile(name=name, sha256=digest, size=len(TRICKLED))
        for name in ("config.json", "model.safetensors")
    ]


def _evaluator(world: World, tmp_path: Path, fetch_limits: FetchLimits) -> Evaluator:
    return evaluator_of(world, EVALUATOR, tmp_path, fetch_limits=fetch_limits)


def _cycle_model(files: list[ModelFile], url: str) -> CycleModel:
    return CycleModel(
        hotkey=MINERS[0].ss58_address, model_sha256=model_hash(files), commitment=HEX,
        commit_beacon_round=1, commit_seq=1, files=files, base_url=url,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rate", "slack", "size", "deadline"),
    [
        (1 * MIB, 30.0, 0, 30.0),  # the defaults: slack alone for nothing
        (1 * MIB, 30.0, 1 * MIB, 31.0),
        (1 * MIB, 30.0, 4 * MIB, 34.0),  # the attack's 4 MiB model: 34 s, not years
        (1 * MIB, 30.0, 8 << 30, 30.0 + 8192.0),  # the spec's default max_bytes (8 GiB)
        (4 * MIB, 0.0, 2 * MIB, 0.5),
        (1 * MIB, 1.0, 32, 1.0 + 32 / MIB),
    ],
)
def test_the_deadline_is_slack_plus_the_declared_size_at_the_minimum_rate(
    rate: float, slack: float, size: int, deadline: float
) -> None:
    limits = FetchLimits(min_rate_bytes_s=rate, slack_s=slack)
    assert math.isclose(limits.deadline_s(size), deadline, rel_tol=1e-12)


@pytest.mark.parametrize(("rate", "slack"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -0.5), (math.nan, 1)])
def test_fetch_limits_out_of_range_are_refused(rate: float, slack: float) -> None:
    with pytest.raises(ValueError, match="minimum fetch rate"):
        FetchLimits(min_rate_bytes_s=rate, slack_s=slack)


def test_a_model_served_at_a_normal_rate_is_fetched(
    world: World, servers: list[BlobServer], tmp_path: Path
) -> None:
    files = _model_dir(tmp_path / "entry", b"\x07" * 4096)
    server = serve_blobs(servers, _blobs(tmp_path / "entry"))
    evaluator = _evaluator(world, tmp_path, FetchLimits())
    folder = evaluator.fetch(_cycle_model(files, server.url))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert (folder / "model.safetensors").read_bytes() == b"\x07" * 4096


def test_a_model_on_the_project_relay_is_fetched(
    relay: Running, keys: Keys, tmp_path: Path
) -> None:
    """The relay the miners use (uvicorn on loopback) serves what the evaluator reads."""
    files = _model_dir(tmp_path / "entry", bytes(range(256)) * 64)
    with RelayClient(relay.url, keys.miner, RUN_ID) as client:
        for f in files:
            client.put(tmp_path / "entry" / f.name, kind="model", round=1001, expiry_round=1050)
    (tmp_path / "got").mkdir()
    fetch_files(relay.url, files, tmp_path / "got", FetchLimits())
    assert (tmp_path / "got" / "model.safetensors").read_bytes() == bytes(range(256)) * 64


def test_a_trickled_header_is_refused_by_the_deadline(
    servers: list[BlobServer], tmp_path: Path
) -> None:
    """The deadline covers the status line and headers, not only the body."""
    server = serve_blobs(servers, {f.sha256: TRICKLED for f in _trickled_files()},
                    gap_s=GAP_S, trickle_head=True)  # fmt: skip
    with pytest.raises(FetchDeadlineError, match="fetch_deadline: 0 of the model's 32"):
        fetch_files(server.url, _trickled_files(), tmp_path, FetchLimits(slack_s=0.5))
    server.finish()
    head = len(f"HTTP/1.1 200 OK\r\ncontent-length: {len(TRICKLED)}\r\n\r\n")
    assert len(server.sent) == 1 and server.sent[0] < head


@pytest.mark.parametrize(
    ("served", "match"),
    [(b"\x02" * 16, "does not hash"), (b"\x01" * 17, "longer than"), (None, "answered 404")],
)
def test_wrong_bytes_are_a_refusal_that_is_not_a_deadline(
    servers: list[BlobServer], tmp_path: Path, served: bytes | None, match: str
) -> None:
    files = _trickled_files()
    server = serve_blobs(servers, {} if served is None else {files[0].sha256: served})
    with pytest.raises(SubmissionError, match=match) as caught:
        fetch_files(server.url, files, tmp_path, FetchLimits())
    assert not isinstance(caught.value, FetchDeadlineError)


def _commit(world: World, key: Any, files: list[ModelFile]) -> str:
    sha = model_hash(files)
    body = {"commitment": commitment(sha, key.ss58_address)}
    assert world.post("/v1/compete/commit", key, "compete-commit", body).status_code == 200
    return sha


def _reveal(world: World, key: Any, files: list[ModelFile], url: str) -> None:
    body = {"model_sha256": model_hash(files), "files": [f.model_dump() for f in files],
            "base_url": url}  # fmt: skip
    assert world.post("/v1/compete/reveal", key, "compete-reveal", body).status_code == 200


def test_a_trickled_model_is_refused_and_the_next_model_of_the_cycle_is_scored(
    world: World, servers: list[BlobServer], tmp_path: Path
) -> None:
    slow_files = _trickled_files()
    # a byte a second against a 3 s slack: the trickle needs 32 s, and the honest 4 KiB
    # model has the same 3 s however loaded the machine is
    slow = serve_blobs(servers, {slow_files[0].sha256: TRICKLED}, gap_s=1.0)
    next_files = _model_dir(tmp_path / "next", b"\x07" * 4096)
    fast = serve_blobs(servers, _blobs(tmp_path / "next"))
    entries = [(MINERS[0], slow_files, slow.url), (MINERS[1], next_files, fast.url)]
    shas = [_commit(world, key, files) for key, files, _ in entries]
    world.tick()
    for key, files, url in entries:
        _reveal(world, key, files, url)
    world.tick(4)  # the cycle opens with both models
    evaluator = _evaluator(world, tmp_path, FetchLimits(slack_s=3.0))
    task = evaluator.service.task(CID, EVALUATOR.ss58_address)
    assert task is not None and [m.model_sha256 for m in task.listed()] == shas
    assert evaluate_open_cycle(evaluator, emit=lambda event, **kw: None) == 2
    slow.finish()
    assert slow.sent and slow.sent[0] < len(TRICKLED)  # given up before the whole file
    (_, first), (_, second) = (evaluator.results[(task.cycle, sha)] for sha in shas)
    assert first.startswith("fetch_deadline: ")
    assert second and "fetch" not in second  # fetched; refused later by the checks
    after = evaluator.service.task(CID, EVALUATOR.ss58_address)
    assert after is not None and set(shas) <= set(after.scored)  # both scores posted


def _listed(hotkey: Any, size: int, seq: int) -> CycleModel:
    files = [
        ModelFile(name="config.json", sha256=f"{seq:064x}", size=2),
        ModelFile(name="model.safetensors", sha256=f"{seq:064x}", size=size),
    ]
    return CycleModel(
        hotkey=hotkey.ss58_address, model_sha256=model_hash(files), commitment=HEX,
        commit_beacon_round=1, commit_seq=seq, files=files, base_url="http://x",
    )  # fmt: skip


def test_models_are_fetched_cached_first_then_smallest_and_failed_servers_last(
    world: World, tmp_path: Path
) -> None:
    """A slow server delays only the models ordered after it: a model declaring the
    largest size goes after every smaller one, and a hotkey whose latest download failed
    goes after every other, whatever it declares, until one of its downloads succeeds."""
    evaluator = _evaluator(world, tmp_path, FetchLimits())
    big, small, kept, other = (
        _listed(MINERS[0], 8 << 30, 1),  # declares the spec's whole max_bytes
        _listed(MINERS[1], 4096, 2),
        _listed(MINERS[2], 1 << 20, 3),
        _listed(MINERS[3], 8192, 4),
    )
    (evaluator.cache_dir / kept.model_sha256).mkdir(parents=True)  # kept from an earlier cycle
    order = evaluator.fetch_order([big, small, kept, other])
    assert [m.commit_seq for m in order] == [3, 2, 4, 1]
    evaluator.fetch_failed.add(small.hotkey)  # its server missed its deadline last cycle
    assert [m.commit_seq for m in evaluator.fetch_order([big, small, kept, other])] == [3, 4, 1, 2]


def test_a_failed_download_moves_its_hotkey_last_until_one_succeeds(
    world: World, servers: list[BlobServer], tmp_path: Path
) -> None:
    evaluator = _evaluator(world, tmp_path, FetchLimits(slack_s=3.0))
    slow_files = _trickled_files()
    slow = serve_blobs(servers, {slow_files[0].sha256: TRICKLED}, gap_s=1.0)
    with pytest.raises(FetchDeadlineError):
        evaluator._fetch_any(_cycle_model(slow_files, slow.url))
    slow.finish()
    assert evaluator.fetch_failed == {MINERS[0].ss58_address}
    good = _model_dir(tmp_path / "good", b"\x07" * 4096)
    fast = serve_blobs(servers, _blobs(tmp_path / "good"))
    evaluator._fetch_any(_cycle_model(good, fast.url))  # the same hotkey, a working server
    assert evaluator.fetch_failed == set()
