"""Sitting out probation after one round gets the first probation reward paid before the
second probation round is audited.

docs/mechanism.md (Probation hold): "Holding everything until the island has passed every
probation audit means a single mismatch during probation costs it all it has earned so
far"; probation "is counted in the rounds the island took part in" (each commit moves
``u = probation_until_round`` later), and the ledger "starts the reward's vesting schedule
from round ``u - 1`` ... So nothing earned during probation vests before round ``u`` is
settled".

The hold is written into each escrow when its round settles, with the ``u`` of that
moment. An island that commits its first probation round honestly and then sits out is
released on the calendar: its round-0 reward vests and is paid, and only its next commit
moves ``u`` (its second probation round is audited). Cheating there costs it nothing it
was paid. Played on the real service and the real ledger (two probation rounds, vesting
over 2 rounds, audit rate 0 after probation).
"""

from __future__ import annotations

from hypertrain.protocol.identity import Hotkey
from tests.challenge import conftest as _fixtures
from tests.challenge.helpers import join_body, signed
from tests.challenge.test_probation_holds import Net, net  # noqa: F401

miner_keys = _fixtures.miner_keys  # the service fixtures' island keys


def test_a_probation_reward_is_not_paid_before_every_probation_round_is_served(
    net: Net,  # noqa: F811
    miner_keys: list[Hotkey],
) -> None:
    """Proves an island that served one of its two probation rounds is paid nothing of it
    until it has served the other, and a mismatch there burns everything it earned."""
    sitter, honest = miner_keys[0], miner_keys[1]
    for key in (sitter, honest):
        joined = net.client.post("/v1/join", json=signed(key, "join", join_body()))
        assert joined.json()["probation_until_round"] == 2
    net.play(0, [sitter, honest])  # the sitter's first probation round, honest
    paid: set[str] = set()
    for index in (1, 2, 3):  # it sits out; its round-0 reward is released on the calendar
        net.play(index, [honest])
        paid |= net.paid(10 + index)
    net.play(4, [sitter, honest], cheat=sitter)  # its second probation round: caught
    entry = net.roster()[sitter.ss58_address]
    assert entry["status"] == "proven_fault"
    assert sitter.ss58_address not in paid and entry["paid"] == 0, (
        f"paid {entry['paid']} of its first probation round before serving the second"
        f" (roster: probation until {entry['probation_until_round']}, burned {entry['burned']})"
    )
