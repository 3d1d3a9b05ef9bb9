"""One answer everywhere: roster, rounds, dashboard and ``get_weights`` agree on faults.

A round goes through the three events that change a verdict's standing: a dispute
overturns island 0's mismatch, the overturned auditor is set aside (its pass of island
1 stops counting, island 1 is held), and another auditor re-judges island 1 as a cheat
after the round settled. After each, every public view must tell the same story as
the settlement that the (real) ledger booked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hypertrain.challenge.wiring import LedgerAdapter
from hypertrain.ledger import Ledger
from hypertrain.protocol.honeypots import commitment
from tests.challenge.dispute_scenario import (
    AUDITOR,
    HONEYPOTS,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    REFEREED,
    RUN,
    Service,
    dispute_doc,
    lose_by_silence,
    merge_round_0,
    started,
    to_verdict,
    verdict_on,
)
from tests.challenge.helpers import bearer

SLUG = {"X-Platform-Challenge-Slug": "hypertrain"}
I0, I1 = (k.ss58_address for k in ISLANDS)


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Service]:
    """The dispute service of the scenario, without probation, over the real integer
    ledger."""
    (tmp_path / "ledger").mkdir()
    ledger = LedgerAdapter(Ledger.in_state_dir(tmp_path / "ledger"))
    doc = dispute_doc(REFEREED, probation_rounds=0)
    doc["reward"] = {"pool_per_round": 1000, "vesting_rounds": 1}
    doc["honeypots"] = {"commitment": commitment(HONEYPOTS), "reveal_round": 0}
    with started(tmp_path, doc, ledger=ledger) as svc:
        yield svc


@dataclass(frozen=True)
class Told:
    """What each public view says about one island."""

    roster: tuple[str, int]  # (status, accused_rounds)
    dashboard: tuple[str, int, bool]  # (status, accused_rounds, its audit row's fault)


def _told(svc: Service) -> tuple[dict[str, Told], int, int]:
    """Per island, and the round's standing mismatches and the run's accused total."""
    roster = {r["hotkey"]: r for r in svc.client.get(f"/v1/runs/{RUN}/roster").json()}
    board = svc.client.get(f"/v1/runs/{RUN}/dashboard").json()
    islands = {i["hotkey"]: i for i in board["islands"]}
    audits = {a["hotkey"]: a for a in board["audits"] if a["round"] == 0}
    (round0,) = svc.client.get(f"/v1/runs/{RUN}/rounds").json()
    summary = svc.client.get(f"/v1/runs/{RUN}").json()
    assert summary["accused_total"] == board["glance"]["accused"]
    told = {
        h: Told(
            (roster[h]["status"], roster[h]["accused_rounds"]),
            (islands[h]["status"], islands[h]["accused_rounds"], audits[h]["accused"]),
        )
        for h in (I0, I1)
    }
    return told, round0["verdicts"]["mismatch"], summary["accused_total"]


def _accused(told: dict[str, Told]) -> set[str]:
    out = set()
    for hotkey, t in told.items():
        faulty = ("accused", "proven_fault")
        views = {t.roster[0] in faulty, t.roster[1] > 0, t.dashboard[0] in faulty}
        views |= {t.dashboard[1] > 0, t.dashboard[2]}
        assert len(views) == 1, f"the views disagree on {hotkey}: {t}"
        if views == {True}:
            out.add(hotkey)
    return out


def _weights(svc: Service, epoch: int) -> dict[str, Any]:
    got = svc.client.get(
        f"/internal/v1/get_weights?epoch={epoch}", headers={**bearer("internal"), **SLUG}
    )
    assert got.status_code == 200, got.text
    weights: dict[str, Any] = got.json()["weights"]
    return weights


def _overturn(svc: Service, verdict_id: str, segment: int) -> None:
    dispute_id = lose_by_silence(svc, verdict_id, segment)
    svc.tick(4)  # the auditor stays silent past its deadline: overturned
    view = svc.client.get(f"/v1/disputes/{dispute_id}").json()
    assert view["game"]["outcome"] == "overturned"
    # a referee's re-audit agrees with the island: only now is the auditor faulty (no
    # jury is listed here, and one contrary claim never bars)
    assert verdict_on(svc, REFEREE, ISLANDS[0], "match").status_code == 200


def test_every_view_tells_the_settlement_s_story(real: Service) -> None:
    verdict_id, segment = to_verdict(real)  # island 0: mismatch by AUDITOR
    assert verdict_on(real, AUDITOR, ISLANDS[1], "match").status_code == 200
    told, mismatches, total = _told(real)
    assert (_accused(told), mismatches, total) == ({I0}, 1, 1)

    _overturn(real, verdict_id, segment)  # overturned; AUDITOR's pass of island 1 set aside
    told, mismatches, total = _told(real)
    assert (_accused(told), mismatches, total) == (set(), 0, 0)

    real.tick(20)
    merge_round_0(real)
    real.tick()  # settles: island 0 paid, island 1 held for a verdict
    phase = real.client.get(f"/v1/runs/{RUN}/rounds").json()[0]["phase"]
    assert phase == "final"
    told, mismatches, total = _told(real)
    assert (_accused(told), mismatches, total) == (set(), 0, 0)

    # another auditor re-judges island 1 after settlement: a cheat, its held reward burns
    assert verdict_on(real, OTHER_AUDITOR, ISLANDS[1], "mismatch").status_code == 200
    told, mismatches, total = _told(real)
    assert (_accused(told), mismatches, total) == ({I1}, 1, 1)
    # one more (empty) round settles, so round 0's escrow vests and is paid as weights
    opened = real.client.post(f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json={})
    assert opened.status_code == 200, opened.text
    for _ in range(3):  # commit window, selection, audit close: one phase per beacon poll
        real.tick(25)
    assert real.client.get(f"/v1/runs/{RUN}/rounds").json()[1]["phase"] == "final"
    weights = _weights(real, 2)
    assert weights.get(I0, 0) > 0 and weights.get(I1, 0) == 0
    roster = {r["hotkey"]: r for r in real.client.get(f"/v1/runs/{RUN}/roster").json()}
    assert roster[I1]["escrow"] == 0 and roster[I1]["burned"] > 0
    # the honeypot table counts the same catch, and no false positive: the honest island's
    # flag was overturned, so the settlement rule never faulted it
    reveal = real.client.post(f"/admin/v1/runs/{RUN}/honeypots", headers=bearer("admin"),
                              json=HONEYPOTS.model_dump(mode="json"))  # fmt: skip
    assert reveal.status_code == 200, reveal.text
    table = real.client.get(f"/v1/runs/{RUN}/honeypots").json()
    rows = {(r["role"], r["strategy"]): r for r in table["table"]}
    assert rows[("island", "wrong-samples")]["caught"] == 1
    assert rows[("island", "wrong-samples")]["missed"] == 0
    assert rows[("island", "honest")]["caught"] is None
    assert rows[("island", "honest")]["false_positives"] == 0


def test_the_standing_of_a_verdict_is_written_once() -> None:
    """Only the standing query (``verdict_storage.STANDING_SQL``, which the facts read) and
    the dispute storage that owns the tables say what stands."""
    src = Path(__file__).resolve().parents[2] / "src" / "hypertrain"
    store = src / "challenge" / "store"
    owners = {
        store / "verdict_storage.py",
        *(store / f"{part}_storage.py" for part in ("game", "reaudit", "window")),
    }
    owners |= set((src / "challenge" / "migrations").glob("*.py"))  # the schema
    found = [
        str(path.relative_to(src))
        for path in sorted(src.rglob("*.py"))
        if path not in owners
        and any(p in path.read_text() for p in ("reassigned_verdicts", "outcome = 'overturned'"))
    ]
    assert found == []
