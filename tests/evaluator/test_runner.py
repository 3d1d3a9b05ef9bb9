"""The evaluator's loop against the real competition service (tests/competition/world.py):
a refusal stops it with the reason, an unreachable service is retried with backoff, and a
cached model is reused only while its files verify."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from hypertrain.api.competition import CompetitionClient
from hypertrain.competition.messages import CycleModel
from hypertrain.competition.submission import SubmissionError, list_directory, model_hash
from hypertrain.evaluator.runner import EvaluatorRefusedError, follow
from hypertrain.protocol.identity import Hotkey
from tests.competition.world import (
    EVALUATOR,
    HEX,
    MINERS,
    World,
    evaluator_of,
    open_cycle_with,
    world,
)

__all__ = ["world"]  # the fixture, by name


def test_an_evaluator_the_service_refuses_stops_with_the_reason(
    world: World, tmp_path: Path
) -> None:
    open_cycle_with(world)
    stranger = evaluator_of(world, Hotkey.from_seed(b"\x44" * 32), tmp_path)
    events: list[tuple[str, dict[str, Any]]] = []
    with pytest.raises(EvaluatorRefusedError, match="spec's evaluators"):
        follow(stranger, emit=lambda e, **kw: events.append((e, kw)), sleep=lambda s: None,
               stop=lambda: len(events) > 5)  # fmt: skip
    # the model (its relay does not exist) was a refusal, kept for the next attempt
    ((losses, refused),) = stranger.results.values()
    assert "could not be fetched" in refused and all(v == float("inf") for v in losses)


def test_an_unreachable_service_is_retried_with_backoff(world: World, tmp_path: Path) -> None:
    down = CompetitionClient("http://127.0.0.1:9", worker_token="x", timeout_s=2)
    evaluator = evaluator_of(world, EVALUATOR, tmp_path, down)
    waits: list[float] = []
    follow(evaluator, stop=lambda: len(waits) >= 8, sleep=waits.append, emit=lambda e, **kw: None)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


def test_a_cached_model_is_reused_only_while_its_files_verify(world: World, tmp_path: Path) -> None:
    """Kept across cycles in --cache-dir (no new download), re-hashed before each use;
    a tampered file is fetched again (here: a relay that is down, so a refusal), and a
    model that left the task is dropped from the cache."""
    evaluator = evaluator_of(world, EVALUATOR, tmp_path)
    source = tmp_path / "entry"
    source.mkdir()
    (source / "config.json").write_text("{}")
    (source / "model.safetensors").write_bytes(b"\x01" * 64)
    files = list_directory(source)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    model = CycleModel(
        hotkey=MINERS[0].ss58_address, model_sha256=model_hash(files), commitment=HEX,
        commit_beacon_round=1, commit_seq=1, files=files, base_url=down,
    )  # fmt: skip
    kept = shutil.copytree(source, evaluator.cache_dir / model.model_sha256)
    assert evaluator.fetch(model) == kept  # the relay is down: the cache answered
    (kept / "model.safetensors").write_bytes(b"\x02" * 64)  # same size, other bytes
    with pytest.raises(SubmissionError, match="could not be fetched"):
        evaluator.fetch(model)
    shutil.copytree(source, kept, dirs_exist_ok=True)
    stale = evaluator.cache_dir / ("ab" * 32)
    stale.mkdir()
    (evaluator.cache_dir / "notes").mkdir()  # not a cache entry: never touched
    evaluator.prune({model.model_sha256})
    assert sorted(p.name for p in evaluator.cache_dir.iterdir()) == [model.model_sha256, "notes"]
