"""One noisy cycle removes the leader's reference for good, and the dormant copy behind
it then takes the cycle from the leader's successor.

docs/competition.md, References: "the dormant copy counts for nothing, and the leader
keeps the cycle: with a successor less than epsilon better it is paid for M"; and "A
reference that fails to count once (page noise can do that to a model barely an
epsilon better than the one before it) leaves for good. Both are the reference's own
hotkey's loss". The loss is not the leader's alone: with the reference gone the
copier's perturbed copy of it is judged against the older bar, counts, and the leader's
successor must beat the copy (the leader's own work) by epsilon. Real service, signed
envelopes, stepped beacon, real ledger (the World of tests/competition/world.py).

Steps: Q's model P; the leader's M, 2 % better, counts; the copier's perturbed copy of
M (committed after M's reveal) counts for nothing; the leader's successor M2, 0.3 %
better than M, keeps M as a reference. One cycle's pages favour P (page noise: P scores
1.95 where M scores 1.96): M, the copy and M2 all fail to count, Q is paid. The next
cycle's pages are ordinary again.

Safe outcome: the copier is paid nothing in that next cycle and the leader keeps it.
"""

from __future__ import annotations

from tests.competition.world import MINERS, World, next_cycle, refs, settle, units, world

__all__ = ["world"]
LEADER, COPIER, NEWCOMER = MINERS[0], MINERS[1], MINERS[2]
PREDECESSOR = NEWCOMER


def _committed(w: World, key: object, tag: str) -> str:
    sha = w.submit(key, tag)  # type: ignore[arg-type]
    w.tick()
    assert w.reveal(key, tag).status_code == 200  # type: ignore[arg-type]
    return sha


def test_one_noisy_cycle_does_not_hand_the_leaders_place_to_its_copier(world: World) -> None:
    p = _committed(world, PREDECESSOR, "p")
    task = next_cycle(world, -1)
    settle(world, task, {p: 2.0})
    m = _committed(world, LEADER, "m")
    task = next_cycle(world, task["cycle"])
    settle(world, task, {p: 2.0, m: 1.96})
    copy = _committed(world, COPIER, "m-perturbed")
    task = next_cycle(world, task["cycle"])
    record = settle(world, task, {p: 2.0, m: 1.96, copy: 1.96})
    assert units(record)[COPIER.ss58_address] == 0  # the copy counts for nothing
    m2 = _committed(world, LEADER, "m2")  # 0.3 % better than m: less than epsilon
    task = next_cycle(world, task["cycle"])
    assert refs(task) == [m]
    settle(world, task, {p: 1.95, m: 1.96, copy: 1.96, m2: 1.96 * 0.997})  # noisy pages
    task = next_cycle(world, task["cycle"])
    listed = {x["model_sha256"] for x in [*task["models"], *task["references"]]}
    losses = {p: 2.0, m: 1.96, copy: 1.96, m2: 1.96 * 0.997}
    record = settle(world, task, {k: v for k, v in losses.items() if k in listed})
    paid = units(record)
    assert paid.get(COPIER.ss58_address, 0) == 0, (paid, refs(task))
    assert paid.get(LEADER.ss58_address, 0) >= 950_000, paid
