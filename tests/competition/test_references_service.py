"""References on the real challenge service: a replaced model stays in the order while a
later commitment stands behind it (signed envelopes, stepped beacon, real ledger)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypertrain.challenge.database import MIGRATIONS, migrate
from tests.competition.world import (
    EVALUATOR,
    MINERS,
    World,
    evaluator_of,
    next_cycle,
    refs,
    settle,
    units,
    world,
)

__all__ = ["world"]  # the fixture, by name
LEADER, COPIER, NEWCOMER = MINERS[0], MINERS[1], MINERS[2]


def test_a_copy_behind_the_leader_blocks_neither_its_small_nor_its_large_step(
    world: World,
) -> None:
    m = world.submit(LEADER, "m")
    world.tick()
    assert world.reveal(LEADER, "m").status_code == 200
    copy = world.submit(COPIER, "m-perturbed")
    world.tick()
    assert world.reveal(COPIER, "m-perturbed").status_code == 200
    task = next_cycle(world, -1)
    record = settle(world, task, {m: 2.0, copy: 2.0})
    assert units(record) == {LEADER.ss58_address: 10**6, COPIER.ss58_address: 0}
    small = world.submit(LEADER, "m2")  # 0.3 %: less than epsilon
    world.tick()
    assert world.reveal(LEADER, "m2").status_code == 200
    task = next_cycle(world, task["cycle"])
    assert refs(task) == [m]
    record = settle(world, task, {m: 2.0, copy: 2.0, small: 2.0 * 0.997})
    assert units(record)[LEADER.ss58_address] == 10**6  # paid for m, its newest that counts
    large = world.submit(LEADER, "m3")  # 1 %: counts, and the leader is paid for it
    world.tick()
    assert world.reveal(LEADER, "m3").status_code == 200
    task = next_cycle(world, task["cycle"])
    assert refs(task) == [m]  # the copy still stands behind m
    record = settle(world, task, {m: 2.0, copy: 2.0, large: 2.0 * 0.99})
    by_model = {r.model_sha256: r for r in record.results}
    assert by_model[large].units >= 950_000 and units(record)[COPIER.ss58_address] == 0
    assert by_model[m].counted and by_model[m].units == 0  # a reference, paid nothing
    assert not by_model[copy].counted


def test_a_reference_leaves_once_nobody_stands_behind_it(world: World) -> None:
    m = world.submit(LEADER, "m")
    world.tick()
    assert world.reveal(LEADER, "m").status_code == 200
    task = next_cycle(world, -1)
    settle(world, task, {m: 2.0})
    m2 = world.submit(LEADER, "m2")
    world.tick()
    assert world.reveal(LEADER, "m2").status_code == 200
    task = next_cycle(world, task["cycle"])
    assert refs(task) == [m]  # m2 is not judged yet: m is its bar
    settle(world, task, {m: 2.0, m2: 2.0 * 0.99})
    task = next_cycle(world, task["cycle"])
    assert refs(task) == []  # m2 counted and nobody is behind m
    record = settle(world, task, {m2: 2.0 * 0.99})
    assert units(record) == {LEADER.ss58_address: 10**6}


def test_a_junk_stream_keeps_no_references_and_a_stale_one_blocks_no_better_model(
    world: World,
) -> None:
    m = world.submit(LEADER, "m")
    world.tick()
    assert world.reveal(LEADER, "m").status_code == 200
    task = next_cycle(world, -1)
    settle(world, task, {m: 2.0})
    junk = world.submit(LEADER, "junk-0")  # the leader keeps m as a stale reference
    world.tick()
    assert world.reveal(LEADER, "junk-0").status_code == 200
    losses = {m: 2.0, junk: 5.0}
    for i in range(1, 4):  # a hotkey that commits junk after junk
        tag = f"junk-{i}"
        spam = world.submit(COPIER, tag)
        world.tick()
        assert world.reveal(COPIER, tag).status_code == 200
        task = next_cycle(world, task["cycle"])
        assert refs(task) == [m], task["references"]  # failed junk never stays
        losses = {k: v for k, v in losses.items() if k in {m, junk}} | {spam: 5.0}
        record = settle(world, task, losses)
        assert units(record)[LEADER.ss58_address] == 10**6
    better = world.submit(NEWCOMER, "better")  # 1 % better than the stale reference
    world.tick()
    assert world.reveal(NEWCOMER, "better").status_code == 200
    task = next_cycle(world, task["cycle"])
    record = settle(world, task, {**losses, better: 2.0 * 0.99})
    assert units(record)[NEWCOMER.ss58_address] >= 950_000


def test_migration_keeps_old_standings_and_derives_whether_they_counted(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "db.sqlite"), isolation_level=None)
    conn.row_factory = sqlite3.Row
    for script in MIGRATIONS[:11]:
        for statement in [s for s in script.split(";") if s.strip()]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version=11")
    for hotkey, comparisons, units_ in (("a", 4, 990), ("b", 4, 10), ("c", 0, 0)):
        conn.execute(
            "INSERT INTO compete_results VALUES ('c', 0, ?, ?, 2.0, 1, ?, 0.5, 0.5, ?)",
            (hotkey, hotkey * 64, comparisons, units_),
        )
    assert migrate(conn) == len(MIGRATIONS)
    rows = conn.execute("SELECT hotkey, units, counted FROM compete_results ORDER BY hotkey")
    assert [(r["hotkey"], r["units"], r["counted"]) for r in rows] == [
        ("a", 990, 1), ("b", 10, 1), ("c", 0, 0),
    ]  # fmt: skip
    # one standing per model now: a hotkey may hold its newest model and a reference
    conn.execute(
        "INSERT INTO compete_results VALUES ('c', 0, 'a', ?, 2.0, 0, 0, 0, 0, 0, 1)", ("f" * 64,)
    )


def test_the_evaluator_scores_the_references_with_the_models(
    world: World,
    tmp_path: Path,
) -> None:
    from hypertrain.evaluator.runner import evaluate_open_cycle

    m = world.submit(LEADER, "m")
    world.tick()
    assert world.reveal(LEADER, "m").status_code == 200
    copy = world.submit(COPIER, "m-perturbed")
    world.tick()
    assert world.reveal(COPIER, "m-perturbed").status_code == 200
    task = next_cycle(world, -1)
    settle(world, task, {m: 2.0, copy: 2.0})
    m2 = world.submit(LEADER, "m2")
    world.tick()
    assert world.reveal(LEADER, "m2").status_code == 200
    task = next_cycle(world, task["cycle"])
    assert refs(task) == [m]
    events: list[dict[str, Any]] = []
    evaluator = evaluator_of(world, EVALUATOR, tmp_path)
    assert evaluate_open_cycle(evaluator, emit=lambda e, **kw: events.append(kw)) == 3
    scored = world.state.conn.execute(
        "SELECT model_sha256 FROM compete_scores WHERE cycle = ?", (task["cycle"],)
    )
    assert {r["model_sha256"] for r in scored} == {m, copy, m2}  # the reference included


def test_a_model_that_counted_once_keeps_that_verdict(tmp_path: Path) -> None:
    """The verdict split reads is whether a model ever counted: a later failure (one
    cycle's pages) does not undo it; a model that never counted is junk."""
    from hypertrain.challenge.database import connect
    from hypertrain.challenge.store.competition_storage import ever_counted

    conn = connect(tmp_path)
    for cycle, counted in ((0, 1), (1, 0), (2, 1), (3, 0)):
        conn.execute(
            "INSERT INTO compete_results VALUES ('c', ?, 'a', 'm', 2.0, 0, 0, 0, 0, 0, ?)",
            (cycle, counted),
        )
    conn.execute("INSERT INTO compete_results VALUES ('c', 1, 'b', 'n', 2.0, 0, 0, 0, 0, 0, 1)")
    conn.execute("INSERT INTO compete_results VALUES ('c', 2, 'b', 'j', 5.0, 0, 0, 0, 0, 0, 0)")
    conn.execute("INSERT INTO compete_results VALUES ('c', 3, 'b', 'j', 5.0, 0, 0, 0, 0, 0, 0)")
    conn.execute("INSERT INTO compete_results VALUES ('d', 5, 'b', 'n', 2.0, 0, 0, 0, 0, 0, 0)")
    assert ever_counted(conn, "c") == {("a", "m"): True, ("b", "n"): True, ("b", "j"): False}
