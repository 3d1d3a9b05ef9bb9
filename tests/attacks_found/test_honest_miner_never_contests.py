"""The honest miner's own defence never contests a ``start`` mismatch or an ``unverifiable``.

docs/mechanism.md (Disputes): "Every fault-bearing verdict (``mismatch`` or
``unverifiable``) is a fault only if it survives a dispute or its dispute window closes
undisputed. The judged island (or its ``hypertrain-miner watch --follow``,
automatically, ...) opens a dispute within the verdict's dispute window"; docs/threats.md
(Disputes): a lying ``unverifiable`` and a leaf-0 mismatch are answered by a
``recompute`` dispute; docs/miner.md: "With ``--follow`` it also defends you".

``watch`` contests only ``mismatch`` verdicts: an ``unverifiable`` lie is reported and
never disputed, so it stands when its window closes, faults the honest island (its
unpaid escrow burned, every later reward of the run forfeited), and bars nobody (an
overturned ``unverifiable`` never bars its auditor, and this one is not even
contested). Played with the miner's own watch pass (``--dispute``) against the real
service and a real relay on loopback. (A ``start`` lie, ``first_bad_leaf: 0``, is read as
"no bad leaf" and contested on the first audited segment, which the service refuses
``not_first_difference``: not played here, it needs the island's stored checkpoints.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.miner.actions import _watch_pass
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext
from hypertrain.miner.report import Reporter
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.client import RelayClient
from tests.challenge.dispute_scenario import (
    HONEST,
    OTHER_AUDITOR,
    RUN,
    THIRD_AUDITOR,
    WITHHELD,
    Service,
    clock,
    keys,
    merge_and_settle,
    relay,
    round_0_with_a_lie,
    serve,
    three,
)
from tests.challenge.helpers import bearer, signed
from tests.relay.conftest import Running

__all__ = ["clock", "keys", "relay", "serve", "three"]  # fixtures, by name
LIES = {"unverifiable": WITHHELD}


def _watch_once(svc: Service, relay_url: str, key: Hotkey, state_dir: Path) -> None:
    """One ``hypertrain-miner watch --dispute`` pass of the honest island."""
    service = ChallengeClient("http://testserver", http=svc.client)
    config = MinerConfig(
        service_url="http://testserver", relay_url=relay_url, run_id=RUN, state_dir=str(state_dir)
    )
    ctx = RunContext(config, service, service.manifest(RUN))
    args = argparse.Namespace(dispute=True, follow=False)
    with RelayClient(relay_url, key, RUN) as relay_client:
        _watch_pass(ctx, key, service, relay_client, {}, {}, Reporter("miner"), args)


@pytest.mark.parametrize("lie", sorted(LIES))
def test_the_honest_miners_watch_contests_every_fault_bearing_lie(
    three: Service, relay: Running, tmp_path: Path, lie: str
) -> None:
    """Proves ``watch --dispute`` opens a dispute against a false ``unverifiable`` on its
    own round (a ``recompute`` dispute: no replay is needed to open it)."""
    verdict_id = round_0_with_a_lie(three, relay.url, LIES[lie])
    _watch_once(three, relay.url, HONEST, tmp_path / "miner-state")
    disputes = three.client.get("/v1/disputes", params={"run_id": RUN}).json()
    contested = [d for d in disputes if d["verdict_id"] == verdict_id]
    assert contested, (
        f"the honest island's watch pass left the liar's {lie} verdict undisputed; it stands"
        " when its window closes"
    )


def test_one_lying_auditor_among_honest_ones_cannot_fault_an_honest_island(
    three: Service, relay: Running, tmp_path: Path
) -> None:
    """Proves the honest-majority claim end to end with the shipped island software: the two
    honest auditors judge ``match``, one liar signs ``unverifiable``, the island runs its
    ``watch --dispute`` pass every few beacon rounds, and the round settles without
    faulting it."""
    svc = three
    round_0_with_a_lie(svc, relay.url, LIES["unverifiable"])
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    for body in (a["body"] for a in assigned):
        for auditor in (OTHER_AUDITOR, THIRD_AUDITOR):  # the honest majority: every byte served
            if body["hotkey"] == HONEST.ss58_address or auditor == OTHER_AUDITOR:
                verdict = {**body, "result": "match", "update_checked": True}
                verdict.pop("selection_beacon_round")
                r = svc.client.post(
                    "/worker/v1/verdict",
                    headers=bearer("worker"),
                    json=signed(auditor, "verdict", verdict, RUN),
                )
                assert r.status_code == 200, r.text
    for _ in range(10):  # the island's watch keeps looking while the windows run
        _watch_once(svc, relay.url, HONEST, tmp_path / "miner-state")
        svc.tick(3)
    merge_and_settle(svc)
    faulted = [f for f in svc.ledger.faults if f[2] == HONEST.ss58_address]
    assert not faulted, (
        "two honest auditors judged 'match', one liar signed 'unverifiable', the island's"
        f" watch never disputed it: the honest island is faulted {faulted}"
    )
