"""Error feedback under ``carry``: the residual the carried state holds is computed from
the update (``carried_of``: ``target - decode(update)``), on the miner from its own
final state and on the auditor from its replay. Defences of the carried-state review that
held (every test here passes), and the stored path when two islands' rounds meet.

* the island's ``write_carried`` (the miner's) and the auditor's replayed carried state
  are the same bytes (plain residual and ``error_feedback_decay`` < 1), the auditor stores
  them on a ``match``, and round 1 derived by the island from its own ``carried.bin`` is
  the state the auditor derives from the stored copy: ``match``;
* a residual of the island's choosing (it steers the next update directly) is a
  mismatch on the ``update`` check of an audit of the round that made it, and a start
  that keeps the previous residual instead of the carried one is a mismatch at leaf 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.auditor.runner import judge_and_post
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import RESIDUAL_PREFIX, TrainState
from tests.attacks_found.carried_state_review import (
    ROSTER,
    Service,
    assignment,
    auditor,
    forged_carried,
    policy_world,
    resealed,
    sha,
    two_rounds,
)
from tests.auditor.islands import MemoryRelay, Published
from tests.auditor.world import ISLANDS, World, make_world

ISLAND = ISLANDS[0]


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-feedback"))


def _quiet(*_: Any, **__: Any) -> None:
    return None


@pytest.mark.parametrize("decay", [None, 0.5])
def test_error_feedback_under_carry_matches_from_the_stored_state(
    made: World, tmp_path: Path, decay: float | None
) -> None:
    world = policy_world(made, error_feedback=True, decay=decay)
    two = two_rounds(world, tmp_path)
    carried = two.r0.index.carried
    assert carried is not None
    kept = two.relay.blobs.pop(carried)  # the island never uploaded it: the auditor stores
    assert sha((tmp_path / "r0" / "carried.bin").read_bytes()) == carried
    details = two.details()
    service = Service(details)
    outcome = judge_and_post(
        auditor(world, two.relay, service), details[0], assignment(0, ISLAND, world), _quiet
    )
    assert outcome.result == "match", outcome.detail
    assert two.relay.blobs.get(carried) == kept  # the auditor's replay: the miner's bytes
    # the residual is carried (non-zero) and round 1's start holds it
    residual = {n: t for n, t in two.start1.tensors.items() if n.startswith(RESIDUAL_PREFIX)}
    assert residual and any(bool(t.abs().sum() > 0) for t in residual.values())
    later = auditor(world, two.relay, Service(details)).judge(
        details[1], assignment(1, ISLAND, world)
    )
    assert later.result == "match", later.detail


def test_a_start_that_keeps_the_final_states_own_residual_is_caught(
    made: World, tmp_path: Path
) -> None:
    """The carried residual is the one the round's update left (not the final state's own,
    which is the residual the round *started* with): a start keeping the latter is a
    mismatch at leaf 0."""
    world = policy_world(made, error_feedback=True)

    def keep_old(state: TrainState) -> TrainState:
        tensors = dict(state.tensors)
        for name in tensors:
            if name.startswith(RESIDUAL_PREFIX):
                tensors[name] = torch.zeros_like(tensors[name])  # round 0 started from zero
        return TrainState(state.step, tensors, state.config_digest)

    two = two_rounds(world, tmp_path, round1_tamper=keep_old)
    details = two.details()
    outcome = auditor(world, two.relay, Service(details)).judge(
        details[1], assignment(1, ISLAND, world)
    )
    assert (outcome.result, outcome.first_bad_leaf) == ("mismatch", 0), outcome.detail


def test_a_chosen_residual_is_caught_by_the_round_that_made_it(made: World, tmp_path: Path) -> None:
    """The index names a carried state whose residual the island chose (its next update
    leans that way): the audit of round 0's final segment is an ``update`` mismatch."""
    world = policy_world(made, error_feedback=True)

    def round0(relay: MemoryRelay, pub: Published) -> Published:
        assert pub.index.carried is not None
        fake = forged_carried(
            relay, world, pub.index.carried,
            lambda n, t: torch.full_like(t, 0.05) if n.startswith(RESIDUAL_PREFIX) else t,
        )  # fmt: skip
        return resealed(world, relay, ISLAND, pub, fake)

    two = two_rounds(world, tmp_path, round0=round0)
    details = two.details()
    service = Service(details)
    outcome = judge_and_post(
        auditor(world, two.relay, service), details[0], assignment(0, ISLAND, world), _quiet
    )
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    assert outcome.carried is None


def test_the_islands_and_the_auditors_round_one_start_agree(made: World, tmp_path: Path) -> None:
    """The start the miner derives from its own ``carried.bin`` (``kept_or_relay`` reads
    the work directory first) and the one the auditor derives from the relay's copy are the
    same state (error feedback on), and so is a start derived with the public inputs
    fetched in another order (the start model first, the carried state later)."""
    world = policy_world(made, error_feedback=True)
    two = two_rounds(world, tmp_path)
    config = TrainConfig.from_manifest(world.manifest, round_index=1)
    local = {sha(p.read_bytes()): p.read_bytes() for p in (tmp_path / "r0").glob("*.bin")}
    previous = PreviousRound(two.r0.commit, lambda: two.r0.start_params, len(ROSTER))
    mine = derive_start_state(
        world.manifest, config, 1, two.r0.start_params, previous,
        lambda s, limit: local[s] if s in local else two.relay.get(s, max_bytes=limit),
    )  # fmt: skip
    theirs = auditor(world, two.relay, Service(two.details())).island_round(
        two.details()[1], assignment(1, ISLAND, world)
    )
    assert theirs.start_state is not None
    assert mine.state_hash() == theirs.start_state.state_hash() == two.start1.state_hash()
