"""Per-island layouts: admitted within the run's limits, published at open, priced at commit."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from hypertrain.challenge.admission.rules import check_join
from hypertrain.challenge.database import MIGRATIONS, migrate, schema_version
from hypertrain.challenge.errors import AdmissionError
from hypertrain.protocol.manifest import LayoutSpec, RunManifest, manifest_from_json
from hypertrain.protocol.messages import JoinRequest, RoundOpen
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    TOKENS_PER_MICRO_BATCH,
    bearer,
    commit_body,
    join_body,
    manifest_doc,
    signed,
)

START = "aa" * 32


def _manifest() -> RunManifest:
    return manifest_from_json(manifest_doc())


def test_within_limits_layouts_are_admitted() -> None:
    manifest = _manifest()
    for devices, micro_batches in ((1, 1), (1, 4), (2, 3)):
        request = JoinRequest.model_validate(
            join_body(devices=devices, micro_batches=micro_batches)
        )
        assert check_join(manifest, request) == "cpu:test"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"micro_batches": 5}, "5 micro-batches exceed the limit of 4"),
        ({"micro_batch_size": 4}, "micro_batch_size is 4, the run's is 5"),
        ({"dp_ranks": 2}, "2 ranks for 1 devices"),
    ],
)
def test_over_limit_layouts_are_refused(change: dict[str, int], message: str) -> None:
    body = join_body()
    body["layout"] |= change
    with pytest.raises(AdmissionError, match=message) as info:
        check_join(_manifest(), JoinRequest.model_validate(body))
    assert info.value.code == "bad_layout"


def test_three_devices_exceed_the_rank_limit() -> None:
    body = join_body(devices=3)
    with pytest.raises(AdmissionError, match="3 ranks exceed the limit of 2"):
        check_join(_manifest(), JoinRequest.model_validate(body))


def test_without_limits_the_default_layout_is_the_largest() -> None:
    doc = manifest_doc()
    del doc["round"]["layout_limits"]
    doc["round"]["layout"] = {"micro_batches": 2, "micro_batch_size": 5}
    spec = manifest_from_json(doc).round
    assert spec.max_samples_per_step == 10
    assert spec.layout_problem(LayoutSpec(micro_batches=1, micro_batch_size=5)) is None
    assert spec.layout_problem(LayoutSpec(micro_batches=3, micro_batch_size=5)) is not None


def test_default_layout_outside_the_limits_is_refused() -> None:
    doc = manifest_doc()
    doc["round"]["layout"] = {"micro_batches": 8, "micro_batch_size": 5}
    with pytest.raises(ValidationError, match="default layout is outside layout_limits"):
        manifest_from_json(doc)


def test_round_open_layouts_must_name_roster_members() -> None:
    base = {
        "round": 0,
        "start_model_sha256": START,
        "start_model_url": "u",
        "beacon_round": 1,
        "assignment_key": START,
        "roster": ["a"],
        "commit_deadline_round": 5,
    }
    record = RoundOpen.model_validate({**base, "layouts": {"a": {"micro_batches": 2}}})
    default = LayoutSpec()
    assert record.layout_of("a", default).micro_batches == 2
    assert record.layout_of("b", default) is default
    with pytest.raises(ValidationError, match="outside the roster"):
        RoundOpen.model_validate({**base, "layouts": {"b": {}}})
    # the islands started fresh are rostered ones, each named once, in order
    assert RoundOpen.model_validate({**base, "fresh_start": ["a"]}).fresh_start == ["a"]
    with pytest.raises(ValidationError, match="outside the roster"):
        RoundOpen.model_validate({**base, "fresh_start": ["b"]})
    many = {**base, "roster": ["a", "b"]}
    for wrong in (["b", "a"], ["a", "a"]):
        with pytest.raises(ValidationError, match="sorted and name each hotkey once"):
            RoundOpen.model_validate({**many, "fresh_start": wrong})


def _join_and_open(h: Harness, micro_batches: list[int]) -> dict[str, object]:
    for key, mb in zip(h.miners, micro_batches, strict=False):
        r = h.client.post("/v1/join", json=signed(key, "join", join_body(micro_batches=mb)))
        assert r.status_code == 200, r.text
        assert r.json()["samples_per_round"] == 8 * 5 * mb
    r = h.client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": START, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()["body"]
    return body


def test_round_open_publishes_each_island_layout(harness: Harness) -> None:
    body = _join_and_open(harness, [3, 1, 2])
    roster = body["roster"]
    assert isinstance(roster, list) and roster == sorted(roster)
    layouts = body["layouts"]
    assert isinstance(layouts, dict) and sorted(layouts) == roster
    by_key = {k.ss58_address: mb for k, mb in zip(harness.miners, [3, 1, 2], strict=False)}
    assert {h: lay["micro_batches"] for h, lay in layouts.items()} == by_key


def test_commit_tokens_must_equal_the_island_budget(harness: Harness) -> None:
    h = harness
    _join_and_open(h, [1, 3])
    wrong = h.client.post("/v1/commit", json=signed(h.miners[1], "commit", commit_body(0)))
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "bad_tokens"
    more = commit_body(0, tokens=TOKENS_PER_MICRO_BATCH + 1)
    assert h.client.post("/v1/commit", json=signed(h.miners[0], "commit", more)).status_code == 400
    for key, mb in zip(h.miners[:2], [1, 3], strict=True):
        commit = commit_body(0, tokens=TOKENS_PER_MICRO_BATCH * mb)
        assert h.client.post("/v1/commit", json=signed(key, "commit", commit)).is_success
    # the stored tokens (which settlement pays) follow the budgets
    stored = dict(
        h.state.conn.execute("SELECT hotkey, tokens FROM commits WHERE round = 0").fetchall()
    )
    assert stored[h.miners[1].ss58_address] == 3 * stored[h.miners[0].ss58_address]


def test_migration_backfills_layouts_from_join_bodies(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "db.sqlite"), isolation_level=None)
    conn.row_factory = sqlite3.Row
    for script in MIGRATIONS[:2]:
        for statement in [s for s in script.split(";") if s.strip()]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version=2")
    conn.execute("INSERT INTO runs VALUES ('r', '{}', '{}', 'd', 0)")
    join = join_body(micro_batches=3)
    conn.execute(
        "INSERT INTO roster VALUES ('r', 'hk', 1, 0, 1, 'cpu:test', 1, ?)", (json.dumps(join),)
    )
    assert migrate(conn) == schema_version(conn) == len(MIGRATIONS)
    row = conn.execute("SELECT layout, join_body FROM roster").fetchone()
    assert json.loads(row["layout"]) == join["layout"]
    assert json.loads(row["join_body"]) == join  # nothing dropped
