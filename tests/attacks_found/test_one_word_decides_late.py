"""Where one colluding auditor's word still decides alone, with three listed auditors.

docs/mechanism.md (Disputes, "The honest-majority assumption"): with three listed
auditors "one dishonest auditor can do nothing alone: its ``match`` against the third
auditor's ``mismatch`` is no quorum", and "no single contrary claim bars anyone".
docs/auditor.md: the audit phase closes early only on "a strict majority of the listed
auditors ... so one fast auditor cannot shut out a slower one's contrary verdict".

Two paths the quorum rule does not cover, both played on the real service with three
listed auditors (A and C honest, B colluding with island X):

* **the first late verdict decides.** X's audit misses its window (X uploads its
  checkpoint at the last moment of its upload deadline, so the honest replays finish after
  the window; or the honest auditors restart). The assignment is listed ``missed`` at
  ``/reassigned``; B posts ``match`` on it the moment it is listed. The service accepts a
  late verdict only "for an assignment that has no verdict yet", so A's true ``mismatch``
  (and C's) arriving after it are refused, and X is paid for a faked round on one word.
* **a lost game plus one word bars.** A misses one answer deadline of X's bisection game
  (``dispute.answer_rounds``, 30 s at the defaults; X can open one game per sybil it runs,
  all against A at once). The game is overturned and A's verdict set aside for a re-audit;
  B's single ``match`` re-audit bars A for the run and sets aside every other verdict A
  signed in a non-final round, although C's re-audit finds the same mismatch A did.
* **an island judges itself.** One key, one role per run covers verdicts and merge tapes
  only: a listed worker key that is also an island of the run signs ``match`` on its own
  audit, and on a missed audit that word is the only one the service takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body
from tests.challenge.helpers import (
    AGGREGATOR,
    FakeLedger,
    SteppedBeacon,
    aggregator_split,
    bearer,
    make_settings,
    manifest_doc,
    signed,
)
from tests.challenge.test_dispute_rules import RULES, THIRD_AUDITOR, _verdict
from tests.challenge.test_disputes import AUDITOR, ISLANDS, OTHER_AUDITOR, RUN, Service, _running
from tests.challenge.test_outsider_1 import _commit_round_0

HONEST_A, COLLUDER_B, HONEST_C = AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR
CHEATER = ISLANDS[0]


def _start(
    tmp_path: Path,
    dispute: dict[str, Any],
    workers: tuple[Hotkey, ...],
    name_aggregator: bool = True,
) -> Iterator[Service]:
    """The service of tests/challenge/test_dispute_rules.py, with the worker keys listed
    and the aggregator listed too (its tapes pass the worker list, it judges nothing) and,
    unless ``name_aggregator`` is false, named in ``HYPERTRAIN_AGGREGATOR_HOTKEYS``."""
    named = {AGGREGATOR.ss58_address} if name_aggregator else set()
    settings = make_settings(
        tmp_path,
        [k.ss58_address for k in ISLANDS],
        worker_hotkeys=frozenset(k.ss58_address for k in (*workers, AGGREGATOR)),
        aggregator_hotkeys=frozenset(named),
    )
    svc = Service(settings, SteppedBeacon(), FakeLedger(), None)  # type: ignore[arg-type]
    with _running(svc):
        doc = manifest_doc(RUN, rate=1.0, segments=2)
        doc["round"]["audit_window_rounds"] = 20
        doc["dispute"] = dispute
        r = svc.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        yield svc


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors, no referee: every verdict's jury is the other two."""
    yield from _start(tmp_path, {**RULES, "referees": []}, (HONEST_A, COLLUDER_B, HONEST_C))


def _post_verdict(svc: Service, key: Hotkey, island: Hotkey, result: str, **fields: Any) -> Any:
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    mine = next(a["body"] for a in assigned if a["body"]["hotkey"] == island.ss58_address)
    body = {**mine, "result": result, "update_checked": True, **fields}
    body.pop("selection_beacon_round")
    return svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(key, "verdict", body, RUN)
    )


def _merge_and_settle(svc: Service) -> None:
    tape = {
        "round": 0,
        "start_model_sha256": "aa" * 32,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "u",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        **aggregator_split(svc.client, RUN, 0, [k.ss58_address for k in ISLANDS]),
    }
    m = svc.client.post(
        "/worker/v1/merge",
        headers=bearer("worker"),
        json=signed(AGGREGATOR, "merge-tape", tape, RUN),
    )
    assert m.status_code == 200, m.text
    svc.tick(40)  # far past every window and dispute bound of the round


def _barred(svc: Service) -> list[str]:
    conn = svc.client.app.state.service.conn  # type: ignore[attr-defined]
    return [r[0] for r in conn.execute("SELECT auditor FROM faulty_auditors")]


def test_one_colluders_late_match_on_a_missed_audit_does_not_decide_alone(
    three: Service,
) -> None:
    """Proves the first late verdict on a missed audit is not a one-key decision: the
    honest auditors' later mismatches still count, and the cheater is not paid."""
    svc = three
    segment = sorted(_commit_round_0(svc)["segments"])[0]
    svc.tick(30)  # X's audit missed its window: nobody judged it in time
    missed = [q["hotkey"] for q in svc.client.get(f"/v1/runs/{RUN}/reassigned").json()]
    assert CHEATER.ss58_address in missed
    lie = _post_verdict(svc, COLLUDER_B, CHEATER, "match")
    assert lie.status_code == 200, lie.text
    truths = [
        _post_verdict(svc, key, CHEATER, "mismatch", check="segment", first_bad_leaf=segment + 1)
        for key in (HONEST_A, HONEST_C)
    ]
    for key in (HONEST_A, HONEST_C, COLLUDER_B):  # the other island is honest
        _post_verdict(svc, key, ISLANDS[1], "match")
    _merge_and_settle(svc)
    paid = svc.ledger.settled.get((RUN, 0), {})
    assert CHEATER.ss58_address not in paid, (
        "one colluding auditor's late 'match' on a missed audit paid the cheater; the two"
        " honest auditors' mismatches were answered"
        f" {[(t.status_code, t.json().get('error')) for t in truths]}"
    )


def test_a_lost_game_and_one_colluding_reaudit_do_not_bar_an_honest_auditor(
    three: Service,
) -> None:
    """Proves that after a bisection game A lost by one missed deadline, one juror's
    ``match`` (against the other juror's ``mismatch``) is no evidence enough to bar A."""
    svc = three
    verdict_id, segments = _verdict(svc, "segment")  # A's true catch of X's segment
    opened = svc.post("/v1/disputes", CHEATER, "dispute-open", open_body(verdict_id, segments[0]))
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    assert game["stage"] != "recompute"  # a bisection game
    r = svc.post(
        f"/v1/disputes/{dispute_id}/answer", CHEATER, "dispute-answer", _commitment(game, "island")
    )
    assert r.status_code == 200, r.text
    svc.tick(4)  # A misses one answer deadline
    assert svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == "overturned"
    lie = _post_verdict(svc, COLLUDER_B, CHEATER, "match")
    truth = _post_verdict(
        svc, HONEST_C, CHEATER, "mismatch", check="segment", first_bad_leaf=segments[0] + 1
    )
    assert lie.status_code == 200, lie.text
    assert HONEST_A.ss58_address not in _barred(svc), (
        "one lost answer deadline and one colluding re-audit barred the honest auditor for"
        f" the run; the other juror's mismatch was answered {truth.status_code}"
        f" {truth.json().get('error')}"
    )


@pytest.fixture
def self_listed(tmp_path: Path) -> Iterator[Service]:
    """The cheater's key is also one of the listed worker keys."""
    workers = (HONEST_A, COLLUDER_B, HONEST_C, CHEATER)
    yield from _start(tmp_path, {**RULES, "referees": []}, workers)


def test_an_island_that_is_also_a_listed_worker_cannot_judge_itself(
    self_listed: Service,
) -> None:
    """Proves a key never signs the verdict of its own island's audit."""
    svc = self_listed
    _commit_round_0(svc)
    svc.tick(30)  # its audit missed the window: the first late verdict is the only one
    own = _post_verdict(svc, CHEATER, CHEATER, "match")
    assert own.status_code in (403, 409), (
        f"the island signed 'match' on its own audit and the service took it: {own.text}"
    )
