"""The competition world: the challenge service in competition mode, and its builders.

The service runs in process (FastAPI's ``TestClient``) on a beacon the test steps by hand,
with the real integer ledger; competition :data:`CID` is created from :func:`spec_doc` with
the secret pool :data:`POOL`. :class:`World` commits, reveals and scores as the miners
(:data:`MINERS`) and the evaluator (:data:`EVALUATOR`) would; the ``world`` fixture is the
world after the competition's creation (a test module imports it by name). Cycles are
driven by :func:`open_cycle_with`, :func:`next_cycle` and :func:`settle`;
:func:`evaluator_of` is the real evaluator on the world's service.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hypertrain.api.competition import CompetitionClient
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.competition.messages import CycleRecord, encode_losses
from hypertrain.competition.pool import encode_pool, pool_tree
from hypertrain.competition.replay import replay_cycle
from hypertrain.competition.submission import ModelFile, commitment, model_hash
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import TOKENS, SteppedBeacon, bearer, make_settings, signed

if TYPE_CHECKING:  # the evaluator loads torch: only evaluator_of imports it
    from hypertrain.evaluator.runner import Evaluator

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


def open_cycle_with(world: World) -> str:
    """Cycle 0 open with one model (of ``MINERS[0]``) committed and revealed; its hash."""
    sha = world.submit(MINERS[0], "a")
    world.tick()
    world.reveal(MINERS[0], "a")
    world.tick(4)
    return sha


def next_cycle(w: World, after: int) -> dict[str, Any]:
    """Tick until a cycle later than ``after`` is open; its task."""
    for _ in range(30):
        w.tick()
        resp = w.client.get(
            f"/worker/v1/competitions/{CID}/task",
            params={"evaluator": EVALUATOR.ss58_address},
            headers=bearer("worker"),
        )
        if resp.status_code == 200 and resp.json()["cycle"] > after:
            doc: dict[str, Any] = resp.json()
            return doc
    raise AssertionError(f"no cycle after {after} opened")


def settle(w: World, task: dict[str, Any], losses: dict[str, float]) -> CycleRecord:
    """Score every listed model (models and references) with constant page losses, close
    the cycle and return its public record, checked against its replay."""
    listed = [m["model_sha256"] for m in [*task["models"], *task["references"]]]
    assert set(listed) == set(losses), (listed, losses)
    for sha in listed:
        assert w.score(sha, [losses[sha]] * 4).status_code == 200
    w.tick()
    client = CompetitionClient("", http=w.client)  # type: ignore[arg-type]
    record = client.cycle_record(CID, task["cycle"])
    assert record.closed
    assert replay_cycle(client.competition(CID), record) == record.results  # reproducible
    return record


def units(record: CycleRecord) -> dict[str, int]:
    """Each hotkey's reward units in the cycle's record."""
    out: dict[str, int] = {}
    for r in record.results:
        out[r.hotkey] = out.get(r.hotkey, 0) + r.units
    return out


def refs(task: dict[str, Any]) -> list[str]:
    """The task's references (older models kept in the order), by hash."""
    return [m["model_sha256"] for m in task["references"]]


def evaluator_of(
    world: World,
    key: Hotkey,
    tmp_path: Path,
    client: CompetitionClient | None = None,
    **options: Any,
) -> Evaluator:
    """The real evaluator of ``key`` on the world's service (or on ``client``), its cache
    under ``tmp_path``; ``options``: the evaluator's own (limits, fetch_limits)."""
    from hypertrain.evaluator.runner import Evaluator

    token = TOKENS["worker"]
    service = client or CompetitionClient("", http=world.client, worker_token=token)  # type: ignore[arg-type]
    spec = CompetitionClient("", http=world.client).competition(CID)  # type: ignore[arg-type]
    return Evaluator(service, key, spec, tmp_path / "cache", HEX, **options)
