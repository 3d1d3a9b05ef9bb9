"""A dormant copy of the leader's model takes the reward once the leader submits its next one.

docs/competition.md: "whoever copies a revealed model commits in a later beacon round than the
original ... a slightly perturbed copy is a newer model that must beat the original by epsilon
on most pages. A hotkey's newest eligible commitment replaces its older ones"; docs/threats.md
(Competition): "copying a revealed model | commit the same bytes later | ... a model hash
scores only for its earliest commitment".

The copier commits a perturbed copy M' of the leader's revealed model M (another byte in the
safetensors metadata, or a negligible change to one weight). While M is in the competition
M' does not count, and costs nothing. When the leader commits its next, slightly better
model M2 (less than epsilon better: an ordinary incremental fine-tune), M2 replaces M. Now M'
is older than M2 and only has to beat what came before it (nothing here; an older incumbent
M already beat in general), so it counts; M2 must beat M', the leader's own work, by epsilon
and does not count. The copier takes the cycle with the leader's model.

Played on the real challenge service (competition routes, signed envelopes, real ledger).
The fix (docs/competition.md, "References"): M stays in the order as a reference while
M' stands behind it, the evaluator scores it with the rest, M' must still beat it by
epsilon, and the leader is paid for its newest model that counts.
"""

from __future__ import annotations

from hypertrain.api.competition import CompetitionClient
from tests.competition.world import CID, MINERS, World, world  # noqa: F401


def test_a_perturbed_copy_of_the_leader_does_not_win_when_the_leader_improves(
    world: World,  # noqa: F811
) -> None:
    leader, copier = MINERS[0], MINERS[1]
    m = world.submit(leader, "m")
    world.tick()
    assert world.reveal(leader, "m").status_code == 200  # M's files are now public
    m_copy = world.submit(copier, "m-perturbed")  # the same weights, one metadata byte changed
    world.tick()
    assert world.reveal(copier, "m-perturbed").status_code == 200
    world.tick(3)  # cycle 0
    assert world.score(m, [2.0] * 4).status_code == 200
    assert world.score(m_copy, [2.0] * 4).status_code == 200  # a copy scores like the original
    world.tick(3)
    m2 = world.submit(leader, "m2")  # the leader's next model: 0.3 % better on every page
    world.tick()
    assert world.reveal(leader, "m2").status_code == 200
    for _ in range(12):  # until cycle 1 opens
        world.tick()
        task = world.client.get(
            f"/worker/v1/competitions/{CID}/task",
            params={"evaluator": "x"},
            headers={"Authorization": "Bearer " + "w" * 32},
        )
        if task.status_code == 200 and task.json()["cycle"] >= 1:
            break
    assert {x["model_sha256"] for x in task.json()["models"]} == {m_copy, m2}, task.json()
    # M stays in the order as a reference: the copy was committed behind it
    assert [x["model_sha256"] for x in task.json()["references"]] == [m], task.json()
    assert world.score(m, [2.0] * 4).status_code == 200
    assert world.score(m_copy, [2.0] * 4).status_code == 200
    assert world.score(m2, [2.0 * 0.997] * 4).status_code == 200
    world.tick(6)
    client = CompetitionClient("", http=world.client)
    cycle = task.json()["cycle"]
    record = client.cycle_record(CID, cycle)
    units: dict[str, int] = {}
    for r in record.results:  # a hotkey may hold two rows: its newest model and a reference
        units[r.hotkey] = units.get(r.hotkey, 0) + r.units
    assert units.get(copier.ss58_address, 0) < units.get(leader.ss58_address, 0), (
        f"cycle {cycle}: a perturbed copy of the leader's revealed model takes the cycle over the"
        f" leader's own better successor: units {units}"
    )
