"""What a round's checkpoint index may name in ``carried``, and what the next audit makes
of it: defences of the carried-state review that held (every test here passes).

Each case plays two rounds of one island under ``carry`` (J = H / 2, both segments
audited) with the real trainer and auditor: the round-0 index names something other than
the island's own carried state, and (a) an audit of round 0 that replays the final
segment is a ``mismatch`` on the ``update`` check, so a cheat audited in the round that
made it is caught; (b) an audit of round 1 whose start the island derived from that name
is ``unverifiable`` whenever the name is not a valid carried state of the run at round 1's
start step.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.auditor.runner import judge_and_post
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.trainer.carried import CarriedState, decode_carried, encode_carried
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import reset_state
from tests.attacks_found.carried_state_review import (
    ROSTER,
    Service,
    TwoRounds,
    assignment,
    auditor,
    forged_carried,
    policy_world,
    resealed,
    two_rounds,
)
from tests.auditor.islands import MemoryRelay, Published, publish_round
from tests.auditor.world import ISLANDS, World, make_world

ISLAND, OTHER = ISLANDS[0], ISLANDS[1]


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-binding"))


@pytest.fixture(scope="module")
def world(made: World) -> World:
    return policy_world(made)


def _quiet(*_: Any, **__: Any) -> None:
    return None


def _round0_verdict(world: World, two: TwoRounds) -> Any:
    details = two.details()
    service = Service(details)
    outcome = judge_and_post(
        auditor(world, two.relay, service), details[0], assignment(0, ISLAND, world), _quiet
    )
    return outcome, service


def _round1_verdict(world: World, two: TwoRounds) -> Any:
    details = two.details()
    return auditor(world, two.relay, Service(details)).judge(
        details[1], assignment(1, ISLAND, world)
    )


def _naming(world: World, name: Any) -> Any:
    """round0 rewriter: the index names ``name(relay, pub)``."""

    def round0(relay: MemoryRelay, pub: Published) -> Published:
        return resealed(world, relay, ISLAND, pub, name(relay, pub))

    return round0


def test_an_index_naming_the_final_checkpoint_is_caught_in_both_rounds(
    world: World, tmp_path: Path
) -> None:
    """The whole final checkpoint (the former chain link) in place of the carried state:
    round 0's final-segment check is a mismatch; round 1's fetch is bounded by the
    carried state's exact size, so the checkpoint is too large: ``unverifiable``."""
    relay = MemoryRelay()
    relay.put(world.model_blob)
    honest = two_rounds(world, tmp_path / "h", relay=relay)
    lie = resealed(world, relay, ISLAND, honest.r0, honest.r0.index.blobs[-1])
    two = TwoRounds(relay, honest.opens, lie, honest.r1, honest.start1)
    outcome, service = _round0_verdict(world, two)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    assert outcome.carried is None and [v["result"] for v in service.verdicts] == ["mismatch"]
    late = _round1_verdict(world, two)
    assert late.result == "unverifiable", late.detail


def test_an_index_naming_another_islands_carried_state_is_caught_when_audited(
    world: World, tmp_path: Path
) -> None:
    """Island 0 names island 1's carried state of the same round (same step, same
    layout: a valid chain link). An audit of round 0 that replays the final segment is a
    mismatch; island 1's own audit matches and stores its state (one address, one
    owner); the residual (round 0 unaudited) is the documented one."""
    relay = MemoryRelay()
    relay.put(world.model_blob)
    from hypertrain.evidence.verify import verify_round_open

    opens = [verify_round_open(world.round_open(0, ROSTER).model_dump(), world.manifest, 0)]
    other = publish_round(world, relay, OTHER, opens, tmp_path / "other")
    assert other.index.carried is not None
    two = two_rounds(
        world, tmp_path / "i", relay=relay,
        round0=_naming(world, lambda _r, _p: other.index.carried),
    )  # fmt: skip
    outcome, _ = _round0_verdict(world, two)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    details = two.details()
    details[0].commits.append(type(details[0].commits[0]).model_validate(other.envelope))
    service = Service(details)
    theirs = judge_and_post(
        auditor(world, relay, service), details[0], assignment(0, OTHER, world), _quiet
    )
    assert theirs.result == "match" and theirs.carried is not None
    assert hashlib.sha256(theirs.carried).hexdigest() == other.index.carried


@pytest.mark.parametrize("case", ["step", "nan", "none", "truncated", "config"])
def test_an_index_naming_an_invalid_carried_state_is_unverifiable_next_round(
    world: World, tmp_path: Path, case: str
) -> None:
    """Another step (a carried state of another round), NaN, no ``carried`` at all, a
    truncated stream, another optimizer config: round 0's audit is a mismatch, and the
    start of round 1 cannot be derived (the island itself cannot train it; the auditor
    says ``unverifiable`` on an assignment whose start it cannot derive)."""
    config = TrainConfig.from_manifest(world.manifest).state_config()

    def name(relay: MemoryRelay, pub: Published) -> str | None:
        honest = pub.index.carried
        assert honest is not None
        state = decode_carried(relay.blobs[honest], config)
        if case == "none":
            return None
        if case == "truncated":
            return relay.put(relay.blobs[honest][:-4])
        if case == "step":
            return relay.put(encode_carried(CarriedState(
                state.step + 4, state.tensors, state.config_digest)))  # fmt: skip
        if case == "config":
            return relay.put(encode_carried(CarriedState(
                state.step, state.tensors, b"\x00" * 32)))  # fmt: skip
        return forged_carried(
            relay, world, honest,
            lambda n, t: torch.full_like(t, math.nan) if n.startswith("optim.") else t,
        )  # fmt: skip

    relay = MemoryRelay()
    relay.put(world.model_blob)
    honest = two_rounds(world, tmp_path / "h", relay=relay)
    lie = _naming(world, name)(relay, honest.r0)
    two = TwoRounds(relay, honest.opens, lie, honest.r1, honest.start1)
    outcome, _ = _round0_verdict(world, two)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    later = _round1_verdict(world, two)
    assert later.result == "unverifiable", later.detail


def test_a_reset_run_ignores_an_index_naming_a_carried_state(made: World, tmp_path: Path) -> None:
    """Under ``reset`` an index that names ``carried`` anyway (any blob) changes nothing:
    round 0 is judged as ever (nothing stored), round 1's start is the public reset state."""
    reset = policy_world(made, policy="reset")
    relay = MemoryRelay()
    relay.put(reset.model_blob)
    junk = relay.put(b"not a carried state")
    two = two_rounds(
        reset, tmp_path, relay=relay,
        round0=lambda r, p: resealed(reset, r, ISLAND, p, junk),
    )  # fmt: skip
    details = two.details()
    service = Service(details)
    outcome = judge_and_post(
        auditor(reset, relay, service), details[0], assignment(0, ISLAND, reset), _quiet
    )
    assert outcome.result == "match" and outcome.carried is None
    config = TrainConfig.from_manifest(reset.manifest, round_index=1)
    public = reset_state(config.state_config(), two.r0.start_params, config.round_start_step(1))
    derived = derive_start_state(
        reset.manifest, config, 1, two.r0.start_params,
        PreviousRound(two.r0.commit, lambda: two.r0.start_params, len(ROSTER)),
        lambda sha, limit: relay.get(sha, max_bytes=limit),
    )  # fmt: skip
    assert derived.state_hash() == public.state_hash()
    later = auditor(reset, relay, Service(details)).judge(details[1], assignment(1, ISLAND, reset))
    assert later.result == "match", later.detail


@pytest.mark.parametrize("value", ["AB" * 32, "ab" * 31, None, 7, "g" * 64])
def test_a_malformed_carried_field_is_a_malformed_index(value: Any) -> None:
    import json

    doc = {"format": "hypertrain-checkpoints/1", "round": 0, "leaves": ["00" * 32],
           "blobs": ["11" * 32], "carried": value}  # fmt: skip
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(VerificationError, match="malformed"):
        CheckpointIndex.from_bytes(data)
