"""A lying auditor wins every segment game against an honest island by telling the truth late.

docs/mechanism.md (Disputes): "since an honest verdict is always upheld (the game is played
only on the real disagreement, with committed answers), a frivolous dispute is a certain loss
of the bond"; the outcomes table: "the traces part before any operation's inputs agree, or all
sections agree | upheld". docs/threats.md (Disputes) lists the game as what lets an honest
island overturn a false mismatch.

Nothing ties a party's section digests (or its operation trace) to the state hashes it
answered before. A lying auditor signs ``mismatch`` on an honest island; in the game it answers
the honest state hashes up to some step and a false one after it (the only lie it needs),
which narrows the game to that step. At the layer stage it then commits the *true* digest of
every section of that step: it can compute them, the island is honest. "All sections agree":
the verdict is upheld, the honest island is faulted and loses its bond, and the liar is never
checked (a lost game by the island bars nobody). The same works one level down by giving the
first operation another input digest ("the traces part before any operation's inputs agree").

Played on the real service (dispute routes, commit-then-reveal, signed envelopes).
"""

from __future__ import annotations

from tests.challenge.dispute_scenario import (
    ISLANDS,
    Service,
    play_against_a_liar,
    service,
    to_verdict,
)
from tests.challenge.disputeplay import open_body

__all__ = ["service"]  # the fixture, by name


def test_a_lying_auditor_cannot_win_the_game_by_agreeing_on_every_section(
    service: Service,
) -> None:
    honest = ISLANDS[0]
    verdict_id, segment = to_verdict(service)  # the liar's mismatch on the honest island
    opened = service.post("/v1/disputes", honest, "dispute-open", open_body(verdict_id, segment))
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    play_against_a_liar(service, dispute_id, turns=40)
    view = service.client.get(f"/v1/disputes/{dispute_id}").json()
    steps = [(s["level"], s.get("step"), s.get("reason")) for s in view["game"].get("steps", [])]
    assert view["game"]["outcome"] != "upheld", (
        "the liar answered one false state hash, then the true digest of every section of that"
        f" step, and its false verdict was upheld against the honest island: {steps}"
    )
