"""Outsider attacks on admission and probation, in process."""

from __future__ import annotations

from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import join_body, signed
from tests.challenge.test_probation_holds import Net, net  # noqa: F401


def test_an_island_that_sits_out_its_probation_is_still_audited_before_it_is_paid(
    net: Net,  # noqa: F811
    miner_keys: list[Hotkey],
) -> None:
    """An island that commits nothing in rounds 0 and 1 (its probation by the calendar)
    is still in probation at its first commit (round 2, rate 0): audited there, where
    counting rounds since admission let its first update be merged and paid unreplayed."""
    honest, idler = miner_keys[0], miner_keys[1]
    for key in (honest, idler):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    net.play(0, [honest])
    net.play(1, [honest])
    net.play(2, [honest, idler])
    detail = net.client.get("/v1/runs/run-1/rounds/2").json()
    audited = {a["body"]["hotkey"] for a in detail["assignments"]}
    assert idler.ss58_address in audited, (
        f"an island that passed no probation audit is not audited: {detail['probation']}"
    )
