"""Outsider attacks on the competition service, in process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.competition.pool import encode_pool
from hypertrain.competition.submission import commitment, model_hash
from hypertrain.protocol.domains import tagged_hash
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import SteppedBeacon, bearer, make_settings, write_metagraph
from tests.competition.world import (  # noqa: F401
    CID,
    MINERS,
    POOL,
    World,
    files_of,
    open_cycle_with,
    spec_doc,
    world,
)

HONEST = Hotkey.from_seed(b"\x70" * 32)


def tiebreak(commitment: str, later_randomness: str) -> str:
    """The same-round order an earlier rule keyed by the next round's randomness: public
    before the reveal, so a sybil could reveal only the variant it put first."""
    data = bytes.fromhex(later_randomness) + bytes.fromhex(commitment)
    return tagged_hash(b"hypertrain/v1/compete-tiebreak", data).hex()


SYBILS = [Hotkey.from_seed(bytes([0x71 + i]) * 32) for i in range(8)]


@pytest.fixture
def many(tmp_path: Path) -> Iterator[World]:
    settings = make_settings(tmp_path, [k.ss58_address for k in [HONEST, *SYBILS]])
    beacon = SteppedBeacon()
    with TestClient(create_app(settings, beacon=beacon)) as client:
        resp = client.post(
            "/admin/v1/competitions",
            json={"spec": spec_doc(), "pool": encode_pool(POOL)},
            headers=bearer("admin"),
        )
        assert resp.status_code == 200, resp.text
        yield World(client, beacon)


def test_sybils_cannot_choose_which_same_round_commitment_comes_first(many: World) -> None:
    """The tie-break is keyed by the next round's randomness, but the attacker chooses what
    to reveal after seeing it: 8 sybils commit 8 variants in the honest model's round, then
    reveal only the variant ordered first, which becomes the "older" model of the pair and
    takes the epsilon advantage over the honest one."""
    commit_round = many.beacon.round + 1
    many.tick()
    honest = many.submit(HONEST, "honest")
    variants = {key: many.submit(key, f"variant-{i}") for i, key in enumerate(SYBILS)}
    many.tick()
    later = many.beacon.get(commit_round + 1).randomness
    rank = {
        key: tiebreak(commitment(sha, key.ss58_address), later) for key, sha in variants.items()
    }
    chosen = min(rank, key=lambda k: rank[k])
    assert many.reveal(HONEST, "honest").status_code == 200
    index = SYBILS.index(chosen)
    assert many.reveal(chosen, f"variant-{index}").status_code == 200
    many.tick(4)
    order = [m["hotkey"] for m in many.task()["models"]]
    assert model_hash(files_of(f"variant-{index}")) == variants[chosen]
    assert order[0] == HONEST.ss58_address, (
        f"the sybil chosen after the tie-break randomness is first: {order}, honest {honest}"
    )


def test_a_hotkey_deregistered_and_registered_again_under_a_new_uid_loses_its_escrow(
    world: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Between two metagraph snapshots the hotkey is deregistered and registered again
    (its uid moves from 0 to 3): on chain that is a deregistration, yet nothing is burned
    and the whole escrow is paid at the next epoch."""
    from hypertrain.challenge.app import _refresh_metagraph

    leaver = MINERS[0]
    sha = open_cycle_with(world)
    assert world.score(sha, [1.0] * 4).status_code == 200
    world.tick(5)
    assert world.score(sha, [1.0] * 4).status_code == 200
    world.tick()
    held = world.state.ledger.balances(CID, [leaver.ss58_address])[leaver.ss58_address]
    assert held.get("escrow", 0) > 0
    again = [k.ss58_address for k in MINERS[1:]] + [leaver.ss58_address]
    write_metagraph(tmp_path / "metagraph.json", again, epoch=2)
    world.client.portal.call(_refresh_metagraph, world.state)  # type: ignore[union-attr]
    world.client.get(
        "/internal/v1/get_weights", params={"epoch": 2},
        headers={**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"},
    )  # fmt: skip
    after = world.state.ledger.balances(CID, [leaver.ss58_address])[leaver.ss58_address]
    assert after.get("burned", 0) > 0, f"a new uid kept the old registration's value: {after}"
