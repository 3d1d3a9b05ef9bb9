"""Honeypot rotation on the real service and ledger: a list per period, each revealed after it.

Period 0 covers round 0 (the cheater runs ``wrong-samples``), period 1 rounds 1 and 2
(the cheater runs ``skip-steps``, the other island is an honest honeypot). Each list is
committed before its first round and revealed once its last round is final; the table
accumulates over the reveals, each entry counted over its own period only. A reveal
that does not hash to its period's commitment (another salt, or the other period's
list) is refused and loses nothing; so are early, duplicate and late messages.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from hypertrain.honeypot.commit import main as commit_tool
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, HoneypotPeriod, commitment
from hypertrain.protocol.identity import Hotkey
from tests.challenge.conftest import Harness, harness, miner_keys  # noqa: F401
from tests.challenge.helpers import bearer, join_body, signed
from tests.challenge.test_probation_holds import Net, net  # noqa: F401

PATH = "/admin/v1/runs/run-1/honeypots"


def _list(*entries: tuple[Hotkey, str]) -> HoneypotList:
    rows = [HoneypotEntry(hotkey=k.ss58_address, role="island", strategy=s) for k, s in entries]
    return HoneypotList(salt=secrets.token_hex(32), entries=rows)


def _commit(client: Any, period: int, first: int, last: int, pots: HoneypotList) -> Any:
    body = {"period": period, "first_round": first, "last_round": last}
    return client.post(
        f"{PATH}/periods", headers=bearer("admin"), json={**body, "commitment": commitment(pots)}
    )


def _reveal(client: Any, pots: HoneypotList, period: int | None = None) -> Any:
    path = PATH if period is None else f"{PATH}/periods/{period}/reveal"
    return client.post(path, headers=bearer("admin"), json=pots.model_dump(mode="json"))


def _error(answer: Any) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]


def _table(client: Any) -> dict[tuple[str, str], dict[str, Any]]:
    rows = client.get("/v1/runs/run-1/honeypots").json()["table"]
    return {(r["role"], r["strategy"]): r for r in rows}


def test_two_periods_revealed_in_turn_accumulate_the_table(
    net: Net,  # noqa: F811
    miner_keys: list[Hotkey],  # noqa: F811
) -> None:
    cheat, honest = miner_keys[0], miner_keys[1]
    for key in (cheat, honest):
        assert net.client.post("/v1/join", json=signed(key, "join", join_body())).is_success
    first = _list((cheat, "wrong-samples"))
    second = _list((cheat, "skip-steps"), (honest, "honest"))
    assert _commit(net.client, 0, 0, 0, first).status_code == 200
    assert _error(_commit(net.client, 0, 0, 0, first)) == (409, "duplicate")
    assert _error(_commit(net.client, 2, 1, 2, second)) == (400, "bad_period")
    assert _error(_commit(net.client, 1, 0, 2, second)) == (400, "overlap")
    assert _commit(net.client, 1, 2, 1, second).status_code == 422  # last before first
    assert _commit(net.client, 1, 1, 2, second).status_code == 200
    assert _error(net.client.get("/v1/runs/run-1/honeypots")) == (404, "not_revealed")

    net.play(0, [cheat, honest], cheat=cheat)
    assert _error(_reveal(net.client, second)) == (409, "early")  # round 2 is not final
    assert _error(_reveal(net.client, second, period=0)) == (400, "bad_reveal")  # swapped
    other_salt = first.model_copy(update={"salt": "00" * 32})
    assert _error(_reveal(net.client, other_salt)) == (400, "bad_reveal")
    assert _reveal(net.client, first).json() == {
        "revealed": True,
        "period": 0,
        "commitment": commitment(first),
        "entries": 1,
    }
    assert _error(_reveal(net.client, first)) == (409, "duplicate")
    after_one = _table(net.client)
    assert after_one == {
        ("island", "wrong-samples"): {
            **after_one[("island", "wrong-samples")],
            "hotkeys": 1,
            "rounds_run": 1,
            "caught": 1,
            "missed": 0,
        }
    }

    net.play(1, [cheat, honest], cheat=cheat)
    net.play(2, [cheat, honest])  # the cheater was caught: it is audited in round 2 too
    assert _error(_reveal(net.client, first, period=1)) == (400, "bad_reveal")
    assert _table(net.client) == after_one  # a refused reveal lost nothing, added nothing
    assert _reveal(net.client, second, period=1).status_code == 200
    table = _table(net.client)
    assert table[("island", "wrong-samples")] == after_one[("island", "wrong-samples")]
    skip = table[("island", "skip-steps")]
    assert (skip["rounds_run"], skip["audited"], skip["caught"], skip["missed"]) == (2, 2, 1, 1)
    fair = table[("island", "honest")]
    assert (fair["rounds_run"], fair["false_positives"], fair["caught"]) == (2, 0, None)
    periods = net.client.get("/v1/runs/run-1/honeypots/periods").json()
    assert [(p["period"], p["list"] is not None) for p in periods] == [(0, True), (1, True)]


def test_a_period_committed_after_its_first_round_opened_is_refused(
    harness: Harness,  # noqa: F811
) -> None:
    h = harness
    pots = _list((h.miners[0], "honest"))
    assert _error(_reveal(h.client, pots)) == (400, "no_commitment")
    opened = h.client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"},
    )
    assert opened.status_code == 200, opened.text
    assert _error(_commit(h.client, 0, 0, 3, pots)) == (409, "late")
    assert h.client.get("/v1/runs/run-1/honeypots/periods").json() == []
    assert _commit(h.client, 0, 1, 3, pots).status_code == 200  # from the next round: on time
    assert _error(_reveal(h.client, pots, period=5)) == (404, "no_period")
    assert _commit(h.client, 1, 4, 4, pots).json()["committed_beacon_round"] == h.beacon.round


def test_the_commit_tool_prints_what_the_service_accepts(
    harness: Harness,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pots = _list((harness.miners[0], "bad-update"))
    path = tmp_path / "honeypots.json"
    path.write_text(pots.model_dump_json())
    assert commit_tool([str(path)]) == 0
    assert capsys.readouterr().out == commitment(pots) + "\n"
    assert commit_tool([str(path), "--period", "0", "--first-round", "0", "--last-round", "2"]) == 0
    body = HoneypotPeriod.model_validate_json(capsys.readouterr().out)
    answer = harness.client.post(f"{PATH}/periods", headers=bearer("admin"), json=body.model_dump())
    assert answer.status_code == 200 and answer.json()["commitment"] == commitment(pots)
