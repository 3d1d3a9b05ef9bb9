"""Accused and proven are two facts with two names in every view.

An island a standing fault verdict accuses (still disputable while its round is not
final) and an island whose fault was proven (booked and burned: ``GET /faults``) were
both "a fault". The roster, the run summary and the dashboard count them apart
(``accused_rounds`` / ``proven_faults``, ``accused_total`` / ``proven_faults_total``,
the glance's ``accused`` / ``proven_faults``, the status ``accused`` / ``proven_fault``),
every proven count is the rows of ``GET /faults``, and the older names that called an
accusation a fault (``faults``, ``faults_total``, the status ``faulted``, the glance's
``faults``, the audit row's ``fault``) are gone: the audit row says ``accused``.
"""

from __future__ import annotations

from typing import Any

from tests.challenge.conftest import Harness
from tests.challenge.dashdata import run_rounds

RUN = "/v1/runs/run-1"


def _views(h: Harness, hotkey: str) -> dict[str, Any]:
    roster = {r["hotkey"]: r for r in h.client.get(f"{RUN}/roster").json()}[hotkey]
    summary = h.client.get(RUN).json()
    board = h.client.get(f"{RUN}/dashboard").json()
    card = {i["hotkey"]: i for i in board["islands"]}[hotkey]
    faults = h.client.get(f"{RUN}/faults").json()
    return {"roster": roster, "summary": summary, "glance": board["glance"], "card": card,
            "proven_rows": [f for f in faults if f["hotkey"] == hotkey]}  # fmt: skip


def _counts(v: dict[str, Any]) -> list[tuple[int, int]]:
    """(accused, proven) as each view tells it."""
    r, s, g, c = v["roster"], v["summary"], v["glance"], v["card"]
    return [
        (r["accused_rounds"], r["proven_faults"]),
        (s["accused_total"], s["proven_faults_total"]),
        (g["accused"], g["proven_faults"]),
        (c["accused_rounds"], c["proven_faults"]),
    ]


def test_an_accusation_is_not_a_proven_fault_until_its_round_is_final(harness: Harness) -> None:
    h = harness
    cheat = h.miners[2].ss58_address
    seen: list[dict[str, Any]] = []
    run_rounds(h, rounds=1, after_verdicts=lambda h, index: seen.append(_views(h, cheat)))
    (accused,) = seen  # the verdict stands, its round is in its audit: disputable
    assert _counts(accused) == [(1, 0)] * 4 and accused["proven_rows"] == []
    assert accused["roster"]["status"] == accused["card"]["status"] == "accused"
    assert "faults" not in accused["roster"] and "faults_total" not in accused["summary"]
    assert "faults" not in accused["glance"]
    audits = [a for a in h.client.get(f"{RUN}/dashboard").json()["audits"] if a["round"] == 0]
    assert all("fault" not in a for a in audits)
    assert {a["hotkey"] for a in audits if a["accused"]} == {cheat}
    proven = _views(h, cheat)  # the round settled: the fault is booked and burned
    assert h.client.get(f"{RUN}/rounds").json()[0]["phase"] == "final"
    assert _counts(proven) == [(1, 1)] * 4 and len(proven["proven_rows"]) == 1
    assert proven["roster"]["status"] == proven["card"]["status"] == "proven_fault"
    for honest in h.miners[:2]:
        clean = _views(h, honest.ss58_address)
        roster = clean["roster"]
        assert (roster["accused_rounds"], roster["proven_faults"]) == (0, 0)
        assert roster["status"] not in ("accused", "proven_fault") and clean["proven_rows"] == []
