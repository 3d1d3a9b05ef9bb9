"""The leaderboard's epsilon is the decayed one, and a spent pool is said once.

In process on a stepped beacon (the world of tests/competition/world.py), with a linear epsilon
and a pool that holds exactly two cycles' pages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.competition.pool import encode_pool, pool_tree
from hypertrain.competition.spec import EpsilonSchedule
from tests.challenge.helpers import SteppedBeacon, bearer, make_settings
from tests.competition.world import CID, MINERS, World, spec_doc

PAGES = 4
POOL = np.random.default_rng(8).integers(0, 300, size=(2 * PAGES, 16)).astype(np.uint32)
EPSILON = {"kind": "linear", "start": 0.02, "end": 0.002, "decay_rounds": 40}


def _spec() -> dict[str, Any]:
    doc = spec_doc(epsilon=EPSILON)
    doc["data"] = {**doc["data"], "pool_root": pool_tree(POOL).root.hex(),
                   "pool_count": len(POOL), "pages_per_eval": PAGES}  # fmt: skip
    return doc


@pytest.fixture
def small(tmp_path: Path) -> Iterator[World]:
    """A competition whose pool is spent by its second cycle."""
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS])
    beacon = SteppedBeacon()
    with TestClient(create_app(settings, beacon=beacon)) as client:
        resp = client.post(
            "/admin/v1/competitions",
            json={"spec": _spec(), "pool": encode_pool(POOL)},
            headers=bearer("admin"),
        )
        assert resp.status_code == 200, resp.text
        yield World(client, beacon)


def _board(world: World) -> dict[str, Any]:
    resp = world.client.get(f"/v1/competitions/{CID}/leaderboard")
    assert resp.status_code == 200, resp.text
    doc: dict[str, Any] = resp.json()
    return doc


def test_epsilon_now_is_the_leaders_decayed_epsilon(small: World) -> None:
    schedule = EpsilonSchedule.model_validate(EPSILON)
    assert _board(small)["epsilon_now"] == schedule.start  # no model eligible yet
    sha = small.submit(MINERS[0], "a")
    committed = small.beacon.round
    small.tick()
    assert small.reveal(MINERS[0], "a").status_code == 200
    small.tick(4)  # cycle 0 opens at round 105
    assert small.score(sha, [2.0] * PAGES).status_code == 200
    small.tick()  # scored by its evaluators: cycle 0 closes
    board = _board(small)
    assert board["competitors"][0]["weight"] and board["latest_cycle"] == 0
    expected = schedule.at(small.beacon.round - committed)
    assert board["epsilon_now"] == pytest.approx(expected)
    assert schedule.end < board["epsilon_now"] < schedule.start


def test_a_spent_pool_is_logged_once(small: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="hypertrain.challenge.competition")
    small.tick(60)  # two cycles spend the pool; ten more come due and cannot open
    opened = small.state.conn.execute("SELECT COUNT(*) FROM compete_cycles").fetchone()[0]
    spent = [r for r in caplog.records if "the pool is spent" in r.getMessage()]
    assert opened == 2
    assert len(spent) == 1 and spent[0].levelno == logging.WARNING, spent
    assert "cycle 1 revealed its last pages" in spent[0].getMessage()
