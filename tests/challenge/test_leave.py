"""Leaving on the real service and the real ledger: off the roster from the next round.

A leaving island's rounds already opened are audited and settled as any other, so a
leave sent while its audit is pending does not save a cheat's escrow; an honest
leaver's escrow keeps vesting and is paid. Each refusal is a typed error that changes
nothing.
"""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness
from tests.challenge.helpers import join_body, signed
from tests.challenge.test_probation_holds import POOL, Net, net  # noqa: F401


def _leave(client: Any, key: Hotkey, reason: str = "done") -> Any:
    return client.post("/v1/leave", json=signed(key, "leave", {"reason": reason}))


def _roster_of(net: Net, index: int) -> list[str]:  # noqa: F811
    detail = net.client.get(f"/v1/runs/run-1/rounds/{index}").json()
    roster: list[str] = detail["open"]["body"]["roster"]
    return roster


def test_a_leave_during_a_pending_audit_still_burns_the_cheat(
    net: Net,  # noqa: F811
    miner_keys: list[Hotkey],
) -> None:
    cheater, honest = miner_keys[0], miner_keys[1]
    for key in (cheater, honest):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    answers: list[Any] = []
    net.play(0, [cheater, honest])  # earns escrow (held: probation)
    net.play(
        1,
        [cheater, honest],
        cheat=cheater,
        after_commit=lambda: answers.append(_leave(net.client, cheater)),
    )
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["left_round"] == 2  # round 1 was open: it stays in it
    roster = net.roster()
    x = cheater.ss58_address
    assert roster[x]["status"] == "proven_fault" and roster[x]["left_round"] == 2
    assert (roster[x]["escrow"], roster[x]["burned"]) == (0, POOL // 2)  # round 0 burned
    net.play(2, [honest])
    assert _roster_of(net, 2) == [honest.ss58_address]
    assert net.ledger.verify().ok


def test_an_honest_leavers_escrow_keeps_vesting_and_is_paid(
    net: Net,  # noqa: F811
    miner_keys: list[Hotkey],
) -> None:
    leaver, stayer = miner_keys[0], miner_keys[1]
    for key in (leaver, stayer):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    net.play(0, [leaver, stayer])
    net.play(1, [leaver, stayer])
    assert _leave(net.client, leaver).json()["left_round"] == 2
    net.play(2, [stayer])
    net.play(3, [stayer])
    assert _roster_of(net, 2) == _roster_of(net, 3) == [stayer.ss58_address]
    entry = net.roster()[leaver.ss58_address]
    assert entry["status"] == "left" and entry["commits"] == 2
    assert (entry["escrow"], entry["vested"] + entry["paid"], entry["burned"]) == (0, POOL, 0)
    assert net.paid(20) >= {leaver.ss58_address}
    assert net.ledger.verify().ok


def test_leave_refusals_are_typed_and_change_nothing(harness: Harness) -> None:
    h, key = harness, harness.miners[0]
    first = _leave(h.client, key)
    assert (first.status_code, first.json()["error"]) == (404, "not_in_roster")
    assert h.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    outsider = _leave(h.client, h.outsider)  # not registered on the subnet
    assert outsider.status_code == 403 and outsider.json()["error"] == "unregistered"
    long = _leave(h.client, key, reason="x" * 257)
    assert (long.status_code, long.json()["error"]) == (400, "bad_body")
    envelope = signed(key, "leave", {"reason": ""})
    assert h.client.post("/v1/leave", json=envelope).status_code == 200
    replayed = h.client.post("/v1/leave", json=envelope)
    assert (replayed.status_code, replayed.json()["error"]) == (409, "replayed")
    again = _leave(h.client, key)
    assert (again.status_code, again.json()["error"]) == (409, "already_left")
    rejoin = h.client.post("/v1/join", json=signed(key, "join", join_body()))
    assert (rejoin.status_code, rejoin.json()["error"]) == (409, "left")
    other_run = h.client.post("/v1/leave", json=signed(key, "leave", {}, run_id="run-x"))
    assert other_run.status_code == 404
    entry = {r["hotkey"]: r for r in h.client.get("/v1/runs/run-1/roster").json()}
    assert entry[key.ss58_address]["left_round"] == 0
