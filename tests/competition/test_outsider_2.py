"""Outsider attacks on the competition service, in process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.competition.pool import encode_pool
from hypertrain.competition.scoring import tiebreak
from hypertrain.competition.submission import commitment, model_hash
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import SteppedBeacon, bearer, make_settings
from tests.competition.test_service import POOL, World, files_of, spec_doc

HONEST = Hotkey.from_seed(b"\x70" * 32)
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
