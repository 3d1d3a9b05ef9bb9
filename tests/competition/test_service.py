"""Competition mode in the challenge service: commit, reveal, cycles, scores, payout.

The service runs in process on a stepped beacon with the real integer ledger; the
scores are posted by test evaluator keys (the evaluator itself is exercised in
test_checks.py and the end-to-end test).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.pool import encode_pool, pool_tree
from hypertrain.competition.submission import ModelFile, commitment, model_hash
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import TOKENS, SteppedBeacon, bearer, make_settings, signed

CID = "comp-1"
MINERS = [Hotkey.from_seed(bytes([0x60 + i]) * 32) for i in range(4)]
EVALUATOR = Hotkey.from_seed(b"\x55" * 32)
OTHER_EVALUATOR = Hotkey.from_seed(b"\x56" * 32)
HEX = "ab" * 32
POOL = np.random.default_rng(7).integers(0, 300, size=(50, 16)).astype(np.uint32)


def spec_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "competition_id": CID,
        "architecture": {"vocab_size": 300, "max_params": 10**6},
        "data": {
            "dataset_root": HEX, "descriptor_sha256": HEX, "tokenizer_sha256": HEX,
            "pool_root": pool_tree(POOL).root.hex(), "pool_count": 50, "seq_len": 16,
            "pages_per_eval": 4,
        },
        "epsilon": {"kind": "constant", "start": 0.005, "end": 0.005},
        "cycle": {"eligibility_delay_rounds": 2, "eval_interval_rounds": 5,
                  "score_window_rounds": 3, "model_time_limit_s": 5},  # 3 rounds of 3 s hold 5 s
        "reward": {"pool_per_cycle": 1_000_000, "temperature": 0.01, "vesting_rounds": 1},
        "evaluators": [EVALUATOR.ss58_address, OTHER_EVALUATOR.ss58_address],
    }  # fmt: skip
    doc.update(over)
    return doc


def files_of(tag: str) -> list[ModelFile]:
    digest = hashlib.sha256(tag.encode()).hexdigest()
    return [
        ModelFile(name="config.json", sha256=digest, size=10),
        ModelFile(name="model.safetensors", sha256=digest[::-1], size=1000),
    ]


@dataclass
class World:
    client: TestClient
    beacon: SteppedBeacon

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.client.app.state.service  # type: ignore[attr-defined]
        return state

    def tick(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            self.beacon.round += 1
            self.client.portal.call(_poll_beacon, self.state)  # type: ignore[union-attr]

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any], **kw: Any) -> Any:
        env = signed(key, domain, body, run_id=CID)
        return self.client.post(path, json=env, **kw)

    def submit(self, key: Hotkey, tag: str) -> str:
        files = files_of(tag)
        sha = model_hash(files)
        body = {"commitment": commitment(sha, key.ss58_address)}
        assert self.post("/v1/compete/commit", key, "compete-commit", body).status_code == 200
        return sha

    def reveal(self, key: Hotkey, tag: str) -> Any:
        files = files_of(tag)
        body = {
            "model_sha256": model_hash(files),
            "files": [f.model_dump() for f in files],
            "base_url": "http://relay",
        }
        return self.post("/v1/compete/reveal", key, "compete-reveal", body)

    def task(self, evaluator: Hotkey = EVALUATOR) -> dict[str, Any]:
        resp = self.client.get(
            f"/worker/v1/competitions/{CID}/task",
            params={"evaluator": evaluator.ss58_address},
            headers=bearer("worker"),
        )
        assert resp.status_code == 200, resp.text
        doc: dict[str, Any] = resp.json()
        return doc

    def score(self, sha: str, losses: list[float], evaluator: Hotkey = EVALUATOR) -> Any:
        task = self.task(evaluator)
        body = {
            "cycle": task["cycle"], "model_sha256": sha, "pages_key": task["pages_key"],
            "losses_f32": encode_losses(losses), "determinism_sha256": HEX,
        }  # fmt: skip
        return self.post(
            "/worker/v1/compete/score", evaluator, "compete-score", body, headers=bearer("worker")
        )

    def weights(self, epoch: int = 1) -> dict[str, Any]:
        """Weights after the next cycle settles (a cycle's reward vests one cycle later)."""
        self.tick(9)
        resp = self.client.get(
            "/internal/v1/get_weights",
            params={"epoch": epoch},
            headers={**bearer("internal"), "X-Platform-Challenge-Slug": "hypertrain"},
        )
        assert resp.status_code == 200, resp.text
        doc: dict[str, Any] = resp.json()
        return doc


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    registered = [k.ss58_address for k in MINERS]
    settings = make_settings(tmp_path, registered)
    beacon = SteppedBeacon()
    with TestClient(create_app(settings, beacon=beacon)) as client:
        resp = client.post(
            "/admin/v1/competitions",
            json={"spec": spec_doc(), "pool": encode_pool(POOL)},
            headers=bearer("admin"),
        )
        assert resp.status_code == 200, resp.text
        yield World(client, beacon)


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


def _open_cycle_with(world: World) -> str:
    sha = world.submit(MINERS[0], "a")
    world.tick()
    world.reveal(MINERS[0], "a")
    world.tick(4)
    return sha


def test_scores_with_bad_shape_or_from_strangers_are_refused(world: World) -> None:
    sha = _open_cycle_with(world)
    assert world.score(sha, [1.0] * 3).json()["error"] == "bad_score"  # wrong page count
    assert world.score(HEX, [1.0] * 4).json()["error"] == "bad_score"  # not in the cycle
    stranger = Hotkey.from_seed(b"\x44" * 32)
    assert world.score(sha, [1.0] * 4, stranger).status_code == 403
    assert world.score(sha, [1.0] * 4).status_code == 200
    assert world.score(sha, [1.0] * 4).status_code == 409  # one score per evaluator


def test_a_late_score_is_refused(world: World) -> None:
    sha = _open_cycle_with(world)
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


def test_the_signed_spec_verifies(world: World) -> None:
    from hypertrain.api.competition import CompetitionClient

    client = CompetitionClient("", http=world.client)
    spec = client.competition(CID)
    assert spec.competition_id == CID and spec.coordinator


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
    sha = _open_cycle_with(world)
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


def _evaluator(world: World, key: Hotkey, tmp_path: Path, client: Any = None) -> Any:
    from hypertrain.api.competition import CompetitionClient
    from hypertrain.evaluator.runner import Evaluator

    token = TOKENS["worker"]
    service = client or CompetitionClient("", http=world.client, worker_token=token)
    spec = CompetitionClient("", http=world.client).competition(CID)
    return Evaluator(service, key, spec, tmp_path / "cache", HEX)


def test_an_evaluator_the_service_refuses_stops_with_the_reason(
    world: World, tmp_path: Path
) -> None:
    from hypertrain.evaluator.runner import EvaluatorRefusedError, follow

    _open_cycle_with(world)
    stranger = _evaluator(world, Hotkey.from_seed(b"\x44" * 32), tmp_path)
    events: list[tuple[str, dict[str, Any]]] = []
    with pytest.raises(EvaluatorRefusedError, match="spec's evaluators"):
        follow(stranger, emit=lambda e, **kw: events.append((e, kw)), sleep=lambda s: None,
               stop=lambda: len(events) > 5)  # fmt: skip
    # the model (its relay does not exist) was a refusal, kept for the next attempt
    ((losses, refused),) = stranger.results.values()
    assert "could not be fetched" in refused and all(v == float("inf") for v in losses)


def test_an_unreachable_service_is_retried_with_backoff(world: World, tmp_path: Path) -> None:
    from hypertrain.api.competition import CompetitionClient
    from hypertrain.evaluator.runner import follow

    down = CompetitionClient("http://127.0.0.1:9", worker_token="x", timeout_s=2)
    evaluator = _evaluator(world, EVALUATOR, tmp_path, down)
    waits: list[float] = []
    follow(evaluator, stop=lambda: len(waits) >= 8, sleep=waits.append, emit=lambda e, **kw: None)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


def test_a_cached_model_is_reused_only_while_its_files_verify(world: World, tmp_path: Path) -> None:
    """Kept across cycles in --cache-dir (no new download), re-hashed before each use;
    a tampered file is fetched again (here: a relay that is down, so a refusal), and a
    model that left the task is dropped from the cache."""
    import shutil
    import socket

    from hypertrain.competition.messages import CycleModel
    from hypertrain.competition.submission import SubmissionError, list_directory, model_hash

    evaluator = _evaluator(world, EVALUATOR, tmp_path)
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
