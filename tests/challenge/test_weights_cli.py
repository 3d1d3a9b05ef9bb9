"""``hypertrain challenge weights`` on a real service with the real ledger: ``paid`` moves.

Without a platform nobody calls ``get_weights``, so vested value is never paid. The
command's call (the same route, token and slug as the platform's) pays it, and the
public roster read right after shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.challenge.app import create_app
from hypertrain.challenge.weights_cli import next_epoch, pay_epoch, render
from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import Ledger
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import (
    TOKENS,
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
)
from tests.challenge.helpers import signed as sign
from tests.challenge.test_probation_holds import POOL, VESTING, Net


@pytest.fixture
def net(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Net]:
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        beacon = SteppedBeacon()
        app = create_app(settings, beacon=beacon, ledger=LedgerAdapter(ledger))
        with TestClient(app) as client:
            doc = manifest_doc(rate=1.0, probation_rounds=0)
            doc["reward"] = {"pool_per_round": POOL, "vesting_rounds": VESTING}
            created = client.post("/admin/v1/runs", headers=bearer("admin"), json={"manifest": doc})
            assert created.status_code == 200, created.text
            yield Net(client, beacon, ledger)


def test_the_weights_call_pays_what_vested(net: Net, miner_keys: list[Hotkey]) -> None:
    islands = miner_keys[:2]
    for key in islands:
        assert net.client.post("/v1/join", json=sign(key, "join", join_body())).is_success
    http = ChallengeClient("http://testserver", internal_token=TOKENS["internal"], http=net.client)
    assert next_epoch(http) == 1
    net.play(0, islands)
    net.play(1, islands)
    before = {e.hotkey: e for e in http.roster("run-1")}
    assert all(e.paid == 0 and e.vested > 0 for e in before.values())

    payout = pay_epoch(http, next_epoch(http))
    after = {e.hotkey: e for e in payout.rosters["run-1"]}
    assert payout.answer.epoch == 1 and next_epoch(http) == 2
    for hotkey, entry in after.items():
        assert entry.paid == before[hotkey].vested > 0  # what had vested is paid
        assert entry.vested == 0 and payout.answer.weights[hotkey] > 0
    text = render(payout)
    assert text.startswith("get_weights epoch 1 (hypertrain): 2 hotkey(s) weighted")
    for hotkey, entry in after.items():
        assert f"run-1  {hotkey}" in text and f"  {entry.paid}  " in text

    again = pay_epoch(http, 1)  # the first answer is final: same epoch, same answer
    assert again.answer == payout.answer
    assert {e.hotkey: e.paid for e in again.rosters["run-1"]} == {
        h: e.paid for h, e in after.items()
    }
    with pytest.raises(ServiceError, match="HTTP 409: epoch 0 precedes epoch 1"):
        pay_epoch(http, 0)  # an epoch before one already answered
