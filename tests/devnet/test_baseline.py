"""The data-parallel baseline trains exactly the merged islands' tokens, and resumes.

``round_batches`` must give step ``i`` of a round as the included islands' own step-``i``
samples (what ``evidence.inputs.round_sample_ids`` assigns each), in roster order, and
nothing of an excluded island; ``train_baseline`` stopped after a round and resumed from
its store must end in the same state as one uninterrupted pass, also when the stop fell
between writing a round's state and its loss.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.devnet import baseline
from hypertrain.devnet.baseline import BaselineStore, round_batches, train_baseline
from hypertrain.evidence.inputs import round_sample_ids
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.messages import RoundOpen
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("baseline"))


def _opens(world: World, rounds: int) -> list[RoundOpen]:
    roster = [k.ss58_address for k in ISLANDS]
    return [
        verify_round_open(world.round_open(r, roster).model_dump(), world.manifest, r)
        for r in range(rounds)
    ]


def test_each_step_is_the_included_islands_own_samples_in_roster_order(world: World) -> None:
    opens = _opens(world, 2)
    kept = sorted(k.ss58_address for k in ISLANDS)[:2]  # the third was left out of the merge
    per = world.manifest.round.layout.samples_per_step
    steps = world.manifest.round.inner_steps
    for r, batches in enumerate(round_batches(world.manifest, world.dataset, opens, [kept] * 2)):
        assert len(batches) == steps
        own = {h: round_sample_ids(world.manifest, world.dataset, opens[: r + 1], h) for h in kept}
        for i, batch in enumerate(batches):
            want = [x for h in kept for x in own[h][i * per : (i + 1) * per]]
            assert [sample_id for sample_id, _ in batch] == want


def test_rounds_before_first_load_nothing(world: World) -> None:
    opens = _opens(world, 2)
    kept = [[k.ss58_address for k in ISLANDS]] * 2
    batches = list(round_batches(world.manifest, world.dataset, opens, kept, first=1))
    assert all(not b for b in batches[0]) and all(batches[1])


def test_a_stopped_baseline_resumes_to_the_same_state(world: World, tmp_path: Path) -> None:
    opens = _opens(world, 2)
    kept = [[k.ss58_address for k in ISLANDS]] * 2

    def rounds(first: int = 0) -> list[list[list[tuple[int, object]]]]:
        return list(round_batches(world.manifest, world.dataset, opens, kept, first=first))

    whole = BaselineStore(tmp_path / "whole", world.manifest)
    losses = train_baseline(world.manifest, world.dataset, rounds(), whole)
    assert len(losses) == 2 and all(loss > 0 for loss in losses)

    parts = BaselineStore(tmp_path / "parts", world.manifest)
    train_baseline(world.manifest, world.dataset, rounds()[:1], parts)
    resumed = BaselineStore(tmp_path / "parts", world.manifest)  # a new process, same directory
    assert train_baseline(world.manifest, world.dataset, rounds(first=1), resumed) == losses
    a, b = whole.state(), resumed.state()
    assert a is not None and b is not None and a.state_hash() == b.state_hash()


def test_a_stop_between_the_state_and_the_losses_retrains_that_round_once(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop after round 1's state was written but before its loss: the resumed baseline
    trains round 1 once, from round 0's state, and ends where an unstopped one does."""
    opens = _opens(world, 2)
    kept = [[k.ss58_address for k in ISLANDS]] * 2
    rounds = list(round_batches(world.manifest, world.dataset, opens, kept))
    whole = BaselineStore(tmp_path / "whole", world.manifest)
    losses = train_baseline(world.manifest, world.dataset, rounds, whole)

    write = baseline._atomic

    def stop_before_round_two_losses(path: Path, data: bytes) -> None:
        if path.name == "losses.json" and len(json.loads(data)["rounds"]) == 2:
            raise KeyboardInterrupt  # the process is stopped here
        write(path, data)

    stopped = BaselineStore(tmp_path / "stopped", world.manifest)
    monkeypatch.setattr(baseline, "_atomic", stop_before_round_two_losses)
    with pytest.raises(KeyboardInterrupt):
        train_baseline(world.manifest, world.dataset, rounds, stopped)
    monkeypatch.setattr(baseline, "_atomic", write)
    assert len(stopped.losses()["rounds"]) == 1
    assert train_baseline(world.manifest, world.dataset, rounds, stopped) == losses
    a, b = whole.state(), stopped.state()
    assert a is not None and b is not None and a.state_hash() == b.state_hash()
    assert [p.name for p in stopped.directory.glob("state-*")] == ["state-2.ckpt"]
