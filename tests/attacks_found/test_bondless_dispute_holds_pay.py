"""An island with no free escrow disputes for nothing, round after round, and holds every
island's pay while each dispute runs.

docs/mechanism.md (Disputes): opening a dispute locks ``dispute.bond`` of the island's
escrow, burned if it is upheld, so "a frivolous dispute costs" its island. The service
locked ``min(dispute.bond, free escrow)``: an island whose escrow a fault had burned (or
that never earned any) locked 0, and every dispute it opened held its round's settlement
for the game's bound (135-150 beacon rounds on a real network) at no cost, every round.

Now a dispute locks the full bond or is refused (``no_bond``, 403); an island's first
dispute under the bond in a run is its one exception (a newcomer's defence against a lying
auditor: ``test_bond_lockout.py``). Here the judged island spends that one dispute in round
0 and loses it; its dispute in round 1, with nothing in escrow, is refused, and round 1
settles on schedule, the other island paid.

The network is the real challenge service (HTTP routes, signed envelopes, stepped beacon)
on the real SQLite ledger.
"""

from __future__ import annotations

from tests.attacks_found import test_bond_lockout as _lockout
from tests.attacks_found.test_bond_lockout import OTHER, RUN, VICTIM, Net
from tests.challenge.disputeplay import open_body

net = _lockout.net  # the real service and ledger; one auditor judges VICTIM ``mismatch``


def test_an_island_without_free_escrow_cannot_hold_a_round_for_nothing(net: Net) -> None:
    verdict_id, segment = net.round_with_a_lie(0)
    first = net.post("/v1/disputes", VICTIM, "dispute-open", open_body(verdict_id, segment, 0))
    assert (first.status_code, first.json()["bond"]) == (200, 0), first.text  # its one
    net.tick(4)  # the island never answers: upheld, the fault burns what it held
    net.merge_and_settle(0)
    assert net.ledger.free_escrow(RUN, VICTIM.ss58_address) == 0

    verdict_id, segment = net.round_with_a_lie(1)
    second = net.post("/v1/disputes", VICTIM, "dispute-open", open_body(verdict_id, segment, 1))
    assert (second.status_code, second.json()["error"]) == (403, "no_bond"), second.text
    assert "one dispute under the bond" in second.json()["detail"]
    net.merge_and_settle(1)  # nothing holds round 1: it is final on schedule
    other = net.ledger.balances(RUN, OTHER.ss58_address)
    assert other.escrowed + other.vested + other.paid > 0
    assert net.ledger.verify().ok
