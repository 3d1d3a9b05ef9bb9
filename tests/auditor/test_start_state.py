"""The whole start state is bound: an island that seeds its own optimizer state is caught.

Under ``reset`` checkpoint 0 must be the merged model with zero moments and the step
counter of the round; under ``carry`` it must be the merged model with the state the
island's previous round carried (``carry_state``), at the address its index named.
Leaf 0 is checked on every audit, so an injected state is caught whichever segments are
assigned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import load_samples, round_sample_ids
from hypertrain.evidence.start import (
    PreviousRound,
    carries_previous,
    derive_start_state,
    previous_carried,
)
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.checkpoints import carried_checkpoint
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.carried import slot_dtype
from hypertrain.trainer.codec import decode_int8
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import carried_of, carry_state, reset_state
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.update import next_round_state
from tests.auditor.islands import MemoryRelay, Published, inject_moments, publish_round
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("start"))


def _opens(world: World, rounds: int, manifest: RunManifest | None = None) -> list[RoundOpen]:
    roster = [k.ss58_address for k in ISLANDS]
    return [
        verify_round_open(world.round_open(w, roster).model_dump(), manifest or world.manifest, w)
        for w in range(rounds)
    ]


def _carry(world: World, carried_dtype: str = "float32", optimizer: str = "adamw") -> World:
    """``world`` under the ``carry`` state policy, its slots carried in ``carried_dtype``,
    its islands stepping with ``optimizer``."""
    update = {"state_policy": "carry", "carried_dtype": carried_dtype, "name": optimizer}
    inner = world.manifest.inner.model_copy(update=update)
    return dataclasses.replace(world, manifest=world.manifest.model_copy(update={"inner": inner}))


def _island(world: World, pub: Published, start: TrainState | None = None) -> IslandRound:
    return IslandRound(world.manifest, pub.commit, pub.index, [], pub.start_params, None, start)


def _samples_island(world: World, pub: Published, opens: list[RoundOpen]) -> IslandRound:
    ids = round_sample_ids(world.manifest, world.dataset, opens, ISLANDS[0].ss58_address)
    island = _island(world, pub)
    return dataclasses.replace(island, samples=load_samples(world.dataset, ids))


def test_reset_state_of_round_zero_is_the_former_fresh_start(world: World) -> None:
    config = TrainConfig.from_manifest(world.manifest).state_config()
    params = decode_model_blob(world.model_blob, world.manifest.model)
    former = next_round_state(init_state(config, world.manifest.seed), params, None)
    assert reset_state(config, params, 0).state_hash() == former.state_hash()
    later = reset_state(config, params, 12)
    assert later.step == 12 and later.state_hash() != former.state_hash()
    with pytest.raises(ValueError, match="no parameter"):
        reset_state(config, {}, 0)


def test_injected_adam_moments_are_caught_on_every_audit(world: World, tmp_path: Path) -> None:
    relay = MemoryRelay()
    relay.put(world.model_blob)
    opens = _opens(world, 1)
    honest = publish_round(world, relay, ISLANDS[0], opens, tmp_path / "honest")
    attacker = publish_round(
        world, relay, ISLANDS[0], opens, tmp_path / "attacker", tamper=inject_moments(0.05)
    )
    # the attack steers the update: it differs from the honest one in direction
    a, b = (decode_int8(relay.blobs[p.commit.update_sha256]) for p in (attacker, honest))
    flat = [torch.cat([t.flatten() for t in d.values()]) for d in (a, b)]
    assert float(torch.nn.functional.cosine_similarity(flat[0], flat[1], dim=0)) < 0.99
    fetch = relay.blobs.__getitem__
    for segments in ([0], [1], [0, 1]):
        good = audit_island(_samples_island(world, honest, opens), segments, fetch)
        assert good.result == "match", good.detail
        bad = audit_island(_samples_island(world, attacker, opens), segments, fetch)
        assert (bad.result, bad.first_bad_leaf) == ("mismatch", 0), bad.detail
        assert "start state" in bad.detail


@pytest.mark.parametrize(
    ("optimizer", "carried_dtype"),
    [("adamw", "float32"), ("adamw", "bfloat16"), ("muon", "bfloat16")],
)
def test_carry_chain_is_checked_against_the_previous_final_state(
    world: World, tmp_path: Path, optimizer: str, carried_dtype: str
) -> None:
    """Muon carries one momentum per weight matrix and AdamW's two moments for the rest:
    every slot is rounded and bound the same way."""
    carry_world = _carry(world, carried_dtype, optimizer)
    manifest = carry_world.manifest
    relay = MemoryRelay()
    relay.put(world.model_blob)
    opens = _opens(carry_world, 2, manifest)
    config = TrainConfig.from_manifest(manifest)
    r0 = publish_round(carry_world, relay, ISLANDS[0], opens[:1], tmp_path / "r0")
    fetch = lambda sha, limit: relay.get(sha, max_bytes=limit)  # noqa: E731
    params = r0.start_params
    previous = PreviousRound(r0.commit, lambda: params)
    derived = derive_start_state(manifest, config, 1, params, previous, fetch)
    slots = slot_dtype(manifest.inner)
    carried = carried_of(r0.result.final, params, manifest.compression, slots=slots)
    expected = carry_state(carried, params, config.state_config())
    assert derived.state_hash() == expected.state_hash()
    # float32: the same bytes as the final state with the merged parameters put in (no
    # residual); bfloat16: its moments rounded, which the unrounded state is not
    legacy = next_round_state(r0.result.final, params, None)
    assert (derived.state_hash() == legacy.state_hash()) == (carried_dtype == "float32")
    carried_slots = [name for name in derived.tensors if name.startswith("optim.")]
    assert any(name.startswith("optim.momentum.") for name in carried_slots) == (
        optimizer == "muon"
    )
    for name in carried_slots:
        want = r0.result.final.tensors[name].to(slots).float()
        assert torch.equal(derived.tensors[name], want)
    assert derived.step == r0.result.final.step and derived.step == 4
    # without a commit in the previous round the island starts from the reset state
    fresh = derive_start_state(manifest, config, 1, params, PreviousRound(None, dict), fetch)
    assert fresh.state_hash() == reset_state(config.state_config(), params, 4).state_hash()
    honest = publish_round(carry_world, relay, ISLANDS[0], opens, tmp_path / "h", start=derived)
    reset = publish_round(carry_world, relay, ISLANDS[0], opens, tmp_path / "r", start=fresh)
    runs = [(honest, "match"), (reset, "mismatch")]
    if carried_dtype != "float32":  # an island that keeps its moments unrounded is caught
        unrounded = publish_round(
            carry_world, relay, ISLANDS[0], opens, tmp_path / "u", start=legacy
        )
        runs.append((unrounded, "mismatch"))
    for pub, result in runs:
        island = IslandRound(manifest, pub.commit, pub.index, [], params, None, derived)
        outcome = audit_island(island, [], relay.blobs.__getitem__)
        assert outcome.result == result, outcome.detail
    # a withheld previous carried state cannot be proven: the island's fault
    assert r0.index.carried is not None
    del relay.blobs[r0.index.carried]
    with pytest.raises(VerificationError, match="not available"):
        previous_carried(r0.commit, config, _raising(relay))


def _raising(relay: MemoryRelay) -> Callable[[str, int], bytes]:
    def fetch(sha: str, limit: int) -> bytes:
        if sha not in relay.blobs:
            raise VerificationError(f"checkpoint {sha[:16]} is not available")
        return relay.get(sha, max_bytes=limit)

    return fetch


def test_an_island_the_record_starts_fresh_carries_nothing(world: World, tmp_path: Path) -> None:
    """An island the round-open record lists in ``fresh_start`` (a proven fault in an
    earlier round) starts from the reset state under ``carry``: its audit needs no upload, and a
    start that carried its optimizer state anyway is a mismatch at leaf 0."""
    carry_world = _carry(world)
    manifest = carry_world.manifest
    relay = MemoryRelay()
    relay.put(world.model_blob)
    caught, honest = ISLANDS[0].ss58_address, ISLANDS[1].ss58_address
    opens = _opens(carry_world, 2, manifest)
    opens[1] = opens[1].model_copy(update={"fresh_start": [caught]})
    assert not carries_previous(manifest, opens[1], caught)
    assert carries_previous(manifest, opens[1], honest)
    assert not carries_previous(manifest, opens[0], honest)  # round 0 has no previous
    config = TrainConfig.from_manifest(manifest)
    r0 = publish_round(carry_world, relay, ISLANDS[0], opens[:1], tmp_path / "r0")
    kept = tmp_path / "r0"
    assert carried_checkpoint(manifest, opens[1], caught, kept, committed=True) is None
    assert carried_checkpoint(manifest, opens[1], honest, kept, committed=True) is not None
    params = r0.start_params
    fetch = lambda sha, limit: relay.get(sha, max_bytes=limit)  # noqa: E731
    carried = derive_start_state(
        manifest, config, 1, params, PreviousRound(r0.commit, lambda: params), fetch
    )
    public = reset_state(config.state_config(), params, config.round_start_step(1))
    fresh = publish_round(carry_world, relay, ISLANDS[0], opens, tmp_path / "f", start=public)
    kept_state = publish_round(carry_world, relay, ISLANDS[0], opens, tmp_path / "k", start=carried)
    for pub, result in ((fresh, "match"), (kept_state, "mismatch")):
        island = IslandRound(manifest, pub.commit, pub.index, [], params, None, public)
        outcome = audit_island(island, [], relay.blobs.__getitem__)
        assert outcome.result == result, outcome.detail
