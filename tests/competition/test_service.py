"""Competition mode in the challenge service: commit, reveal, cycles, scores, payout.

The service runs in process on a stepped beacon with the real integer ledger (the world
of tests/competition/world.py); the scores are posted by test evaluator keys (the
evaluator itself is exercised in tests/evaluator and the end-to-end test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.pool import encode_pool
from hypertrain.competition.submission import commitment, model_hash
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import SteppedBeacon, bearer, make_settings
from tests.competition.world import (
    CID,
    EVALUATOR,
    HEX,
    MINERS,
    OTHER_EVALUATOR,
    POOL,
    World,
    files_of,
    open_cycle_with,
    spec_doc,
    world,
)

__all__ = ["world"]  # the fixture, by name


def test_clearly_better_takes_the_weight_and_within_epsilon_does_not(world: World) -> None:
    incumbent = world.submit(MINERS[0], "a")
    world.tick()
    close = world.submit(MINERS[1], "b")
    better = world.submit(MINERS[2], "c")
    assert world.reveal(MINERS[0], "a").status_code == 200
    world.tick()  # a reveal comes after its commit's round
    for key, tag in zip(MINERS[1:3], "bc", strict=True):
        assert world.reveal(key, tag).status_code == 200
    world.tick(3)  # cycle 0 due at start + 5
    task = world.task()
    assert task["cycle"] == 0 and len(task["pages"]) == 4
    shas = [m["model_sha256"] for m in task["models"]]
    assert shas[0] == incumbent and set(shas[1:]) == {close, better}  # oldest first
    assert world.score(incumbent, [3.0] * 4).status_code == 200
    assert world.score(close, [3.0 * 0.997] * 4).status_code == 200
    assert world.score(better, [2.0] * 4).status_code == 200
    world.tick()
    board = world.client.get(f"/v1/competitions/{CID}/leaderboard").json()
    top = board["competitors"][0]
    assert top["hotkey"] == MINERS[2].ss58_address and top["win_rate"] == 1.0
    ranks = [c["hotkey"] for c in board["competitors"]]
    assert ranks.index(MINERS[0].ss58_address) < ranks.index(MINERS[1].ss58_address)
    weights = world.weights()["weights"]
    assert weights[MINERS[2].ss58_address] > 0.99 * sum(weights.values())


def test_a_copy_committed_after_the_reveal_is_never_scored(world: World) -> None:
    leader = world.submit(MINERS[0], "a")
    world.tick()
    assert world.reveal(MINERS[0], "a").status_code == 200
    copy = world.submit(MINERS[1], "a")  # the revealed files: necessarily a later round
    assert copy == leader
    world.tick()
    assert world.reveal(MINERS[1], "a").status_code == 200
    world.tick(3)
    assert [m["hotkey"] for m in world.task()["models"]] == [MINERS[0].ss58_address]
    world.score(leader, [2.0] * 4)
    world.tick()
    board = world.client.get(f"/v1/competitions/{CID}/leaderboard").json()
    status = {c["hotkey"]: c["status"] for c in board["competitors"]}
    assert status[MINERS[1].ss58_address] == "duplicate"
    copier = next(c for c in board["competitors"] if c["hotkey"] == MINERS[1].ss58_address)
    assert copier["win_rate"] is None and copier["weight"] is None  # never scored


def test_a_model_committed_too_late_is_not_eligible(world: World) -> None:
    world.tick(4)
    world.submit(MINERS[0], "a")  # two rounds of delay would end after the cycle round
    world.tick()  # cycle 0 opens at round 5: the model is neither eligible nor revealed yet
    assert world.reveal(MINERS[0], "a").status_code == 200
    row = world.state.conn.execute("SELECT task, closed FROM compete_cycles").fetchone()
    assert '"models":[]' in row["task"] and row["closed"] == 1  # an empty cycle closes at once


def test_unscored_and_disputed_models_earn_nothing(world: World) -> None:
    a = world.submit(MINERS[0], "a")
    b = world.submit(MINERS[1], "b")
    world.submit(MINERS[2], "c")
    world.tick()
    for key, tag in zip(MINERS[:3], "abc", strict=True):
        world.reveal(key, tag)
    world.tick(4)
    world.score(a, [3.0] * 4)
    world.score(b, [2.0] * 4)
    world.score(b, [1.0] * 4, OTHER_EVALUATOR)  # evaluators disagree on b
    world.tick(4)  # past the score deadline; c was never scored
    weights = world.weights()["weights"]
    assert set(weights) == {MINERS[0].ss58_address}
    rows = world.state.conn.execute("SELECT model_sha256 FROM compete_results WHERE cycle = 0")
    assert {r["model_sha256"] for r in rows} == {a}  # b disputed, c never scored


def test_a_reveal_in_its_commits_round_is_refused(world: World) -> None:
    """Revealing strictly after the commit's round means a copy (committed after seeing
    the reveal) always carries a later round than the original: no tie to break."""
    world.submit(MINERS[0], "a")
    early = world.reveal(MINERS[0], "a")
    assert (early.status_code, early.json()["error"]) == (409, "reveal_too_early")
    world.tick()
    assert world.reveal(MINERS[0], "a").status_code == 200


def test_reveal_without_a_commitment_is_refused(world: World) -> None:
    resp = world.reveal(MINERS[0], "a")
    assert resp.status_code == 404 and resp.json()["error"] == "no_commitment"


def test_reveal_by_another_hotkey_is_refused(world: World) -> None:
    world.submit(MINERS[0], "a")
    resp = world.reveal(MINERS[1], "a")
    assert resp.status_code == 404


def test_reveal_with_a_wrong_file_list_is_refused(world: World) -> None:
    world.submit(MINERS[0], "a")
    files = files_of("other")
    body = {
        "model_sha256": model_hash(files_of("a")),
        "files": [f.model_dump() for f in files],
        "base_url": "http://relay",
    }
    resp = world.post("/v1/compete/reveal", MINERS[0], "compete-reveal", body)
    assert resp.status_code == 400 and resp.json()["error"] == "bad_submission"


def test_an_unregistered_hotkey_cannot_commit(world: World) -> None:
    outsider = Hotkey.from_seed(b"\x99" * 32)
    resp = world.post("/v1/compete/commit", outsider, "compete-commit", {"commitment": HEX})
    assert resp.status_code == 403


def test_duplicate_commitment_is_refused(world: World) -> None:
    world.submit(MINERS[0], "a")
    sha = model_hash(files_of("a"))
    body = {"commitment": commitment(sha, MINERS[0].ss58_address)}
    resp = world.post("/v1/compete/commit", MINERS[0], "compete-commit", body)
    assert resp.status_code == 409


def test_scores_with_bad_shape_or_from_strangers_are_refused(world: World) -> None:
    sha = open_cycle_with(world)
    assert world.score(sha, [1.0] * 3).json()["error"] == "bad_score"  # wrong page count
    assert world.score(HEX, [1.0] * 4).json()["error"] == "bad_score"  # not in the cycle
    stranger = Hotkey.from_seed(b"\x44" * 32)
    assert world.score(sha, [1.0] * 4, stranger).status_code == 403
    assert world.score(sha, [1.0] * 4).status_code == 200
    assert world.score(sha, [1.0] * 4).status_code == 409  # one score per evaluator


def test_a_late_score_is_refused(world: World) -> None:
    sha = open_cycle_with(world)
    task = world.task()
    world.tick(4)
    body = {
        "cycle": task["cycle"], "model_sha256": sha, "pages_key": task["pages_key"],
        "losses_f32": encode_losses([1.0] * 4), "determinism_sha256": HEX,
    }  # fmt: skip
    resp = world.post(
        "/worker/v1/compete/score", EVALUATOR, "compete-score", body, headers=bearer("worker")
    )
    assert resp.status_code in (404, 409)


def test_a_spec_with_unknown_keys_is_refused(world: World) -> None:
    resp = world.client.post(
        "/admin/v1/competitions",
        json={"spec": spec_doc(competition_id="comp-2", surprise=1), "pool": encode_pool(POOL)},
        headers=bearer("admin"),
    )
    assert resp.status_code == 400 and resp.json()["error"] == "bad_spec"


def test_a_cycle_is_reproducible_from_its_public_record(world: World) -> None:
    from hypertrain.api.competition import CompetitionClient
    from hypertrain.competition.replay import replay_cycle

    a, b = world.submit(MINERS[0], "a"), world.submit(MINERS[1], "b")
    assert world.client.get(f"/v1/competitions/{CID}/cycles/0").status_code == 404
    world.tick()
    world.reveal(MINERS[0], "a"), world.reveal(MINERS[1], "b")
    world.tick(4)
    assert world.score(a, [3.0, 3.0, 2.0, 3.0]).status_code == 200
    assert world.score(b, [2.0, 2.0, 3.0, 2.0]).status_code == 200
    world.tick()
    client = CompetitionClient("", http=world.client)
    spec = client.competition(CID)
    record = client.cycle_record(CID, 0)
    assert record.closed and len(record.scores) == 2
    assert replay_cycle(spec, record) == record.results
    assert sum(r.units for r in record.results) == spec.reward.weight_units
    # the revealed pages are the pool's, proven against the root the signed spec carries
    assert {p.position for p in record.task.revealed} == set(record.task.pages)
    forged = record.model_copy(
        update={"task": record.task.model_copy(update={"pages": record.task.pages[::-1]})}
    )
    with pytest.raises(ValueError):
        replay_cycle(spec, forged)


def test_cycles_reveal_disjoint_pool_pages(world: World) -> None:
    world.submit(MINERS[0], "a")
    world.tick()
    world.reveal(MINERS[0], "a")
    seen: list[int] = []
    for _ in range(3):
        world.tick(5)
        task = world.task()
        assert not set(task["pages"]) & set(seen)
        seen += task["pages"]
        world.score(task["models"][0]["model_sha256"], [1.0] * 4)
    spec_env = world.client.get(f"/v1/competitions/{CID}").json()
    assert "pool" not in spec_env["body"] and spec_env["body"]["spec"]["data"]["pool_count"] == 50


def test_a_competition_nobody_can_score_is_refused_with_the_setting_to_change(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS], worker_hotkeys=frozenset())
    with TestClient(create_app(settings, beacon=SteppedBeacon())) as client:
        doc = {"spec": spec_doc(evaluators=[]), "pool": encode_pool(POOL)}
        resp = client.post("/admin/v1/competitions", json=doc, headers=bearer("admin"))
        assert resp.status_code == 400 and resp.json()["error"] == "no_evaluators"
        assert "HYPERTRAIN_EVALUATOR_HOTKEYS" in resp.json()["detail"]
        bad_pool = {"spec": spec_doc(), "pool": encode_pool(POOL[::-1].copy())}
        resp = client.post("/admin/v1/competitions", json=bad_pool, headers=bearer("admin"))
        assert resp.status_code == 400 and resp.json()["error"] == "bad_pool"


def test_a_competition_only_hotkey_that_deregisters_is_burned_at_the_next_epoch(
    world: World, tmp_path: Path
) -> None:
    from hypertrain.challenge.app import _refresh_metagraph
    from tests.challenge.helpers import write_metagraph

    leaver = MINERS[0]
    sha = open_cycle_with(world)
    assert world.score(sha, [1.0] * 4).status_code == 200
    world.tick(5)  # cycle 0 settles; cycle 1 opens
    assert world.score(sha, [1.0] * 4).status_code == 200
    world.tick()
    held = world.state.ledger.balances(CID, [leaver.ss58_address])[leaver.ss58_address]
    assert held.get("escrow", 0) + held.get("vested", 0) > 0
    assert not world.state.conn.execute(
        "SELECT 1 FROM roster WHERE hotkey = ?", (leaver.ss58_address,)
    ).fetchone()  # it never trained: it is in no run's roster
    write_metagraph(tmp_path / "metagraph.json", [k.ss58_address for k in MINERS[1:]], epoch=2)
    world.client.portal.call(_refresh_metagraph, world.state)  # type: ignore[union-attr]
    resp = world.client.get(
        "/internal/v1/get_weights", params={"epoch": 2},
        headers={**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"},
    )  # fmt: skip
    assert resp.status_code == 200 and leaver.ss58_address not in resp.json()["weights"]
    after = world.state.ledger.balances(CID, [leaver.ss58_address])[leaver.ss58_address]
    assert after.get("escrow", 0) == after.get("vested", 0) == 0
    assert after.get("burned", 0) == held.get("escrow", 0) + held.get("vested", 0)
