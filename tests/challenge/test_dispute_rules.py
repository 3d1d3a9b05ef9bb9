"""The dispute rules through the real service: admissibility, recomputation, no referee.

* a dispute of any segment but the verdict's first differing one is refused;
* a mismatch of the leaf-0 or update check opens no game: another auditor's re-audit
  decides it (and only then is the verdict's auditor barred);
* a run without referees still decides every game, within ``Rules.bound_rounds``;
* ``GET /v1/disputes?round=<huge>`` is a 400, not a server error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.dispute.game import Rules
from hypertrain.dispute.opinputs import encode
from tests.challenge.disputeplay import TENSORS, play_to_referee
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)
from tests.challenge.test_disputes import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RUN,
    TREE,
    Service,
    _running,
)

RULES = {"bond": 0, "answer_rounds": 3, "referee_rounds": 3, "clock_rounds": 6}


def _start(tmp_path: Path, dispute: dict[str, Any]) -> Iterator[Service]:
    settings = make_settings(tmp_path, [k.ss58_address for k in ISLANDS])
    svc = Service(settings, SteppedBeacon(), FakeLedger(), None)  # type: ignore[arg-type]
    with _running(svc):
        doc = manifest_doc(RUN, rate=1.0, segments=2)
        doc["round"]["audit_window_rounds"] = 20
        doc["dispute"] = dispute
        r = svc.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        yield svc


@pytest.fixture
def refereed(tmp_path: Path) -> Iterator[Service]:
    yield from _start(tmp_path, {**RULES, "referees": [ISLANDS[1].ss58_address]})


@pytest.fixture
def unrefereed(tmp_path: Path) -> Iterator[Service]:
    yield from _start(tmp_path, {**RULES, "referees": [], "referee_extensions": 1})


def _verdict(svc: Service, check: str | None, bad_leaf: int | None = None) -> tuple[str, list[int]]:
    """Round 0 committed; island 0 judged a mismatch of ``check`` by AUDITOR."""
    for key in ISLANDS:
        assert svc.post("/v1/join", key, "join", join_body()).status_code == 200
    r = svc.client.post(
        f"/admin/v1/runs/{RUN}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text
    for key in ISLANDS:
        body = {**commit_body(0), "checkpoint_root": TREE.root_hex}
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200
    svc.tick(4)
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    mine = next(a["body"] for a in assigned if a["body"]["hotkey"] == ISLANDS[0].ss58_address)
    segments = sorted(mine["segments"])
    leaf = {"start": 0, "update": 4}.get(check or "", segments[0] + 1)
    verdict = {
        **mine,
        "result": "mismatch",
        "first_bad_leaf": leaf if bad_leaf is None else bad_leaf,
    }
    verdict |= {"check": check, "update_checked": True}
    if check == "unverifiable":  # the auditor says bytes were withheld: no check, no leaf
        verdict = {**mine, "result": "unverifiable", "detail": "index withheld"}
    verdict.pop("selection_beacon_round")
    r = svc.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(AUDITOR, "verdict", verdict, RUN),
    )
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], segments


def _reaudit(svc: Service, result: str, **fields: Any) -> None:
    """OTHER_AUDITOR re-judges island 0; a mismatch names its check in ``fields``."""
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    mine = next(a["body"] for a in assigned if a["body"]["hotkey"] == ISLANDS[0].ss58_address)
    body = {**mine, "result": result, "update_checked": True, **fields}
    body.pop("selection_beacon_round")
    r = svc.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(OTHER_AUDITOR, "verdict", body, RUN),
    )
    assert r.status_code == 200, r.text


def _faulty(svc: Service) -> list[str]:
    conn = svc.client.app.state.service.conn  # type: ignore[attr-defined]
    return [r[0] for r in conn.execute("SELECT auditor FROM faulty_auditors")]


def test_a_dispute_of_an_honest_segment_is_refused(refereed: Service) -> None:
    verdict_id, segments = _verdict(refereed, "segment")
    assert len(segments) >= 2, segments  # the first bad one and honest later ones
    honest = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[1])
    )
    assert (honest.status_code, honest.json()["error"]) == (400, "not_first_difference")
    first = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    assert first.status_code == 200, first.text
    assert first.json()["game"]["stage"] == "step"


@pytest.mark.parametrize("check", ["start", "update"])
def test_start_and_update_mismatches_are_recomputed_not_played(
    refereed: Service, check: str
) -> None:
    verdict_id, segments = _verdict(refereed, check)
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    assert opened.status_code == 200, opened.text
    game = opened.json()["game"]
    assert (game["stage"], game["check"]) == ("recompute", check)
    queue = refereed.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["verdict_id"] for q in queue] == [verdict_id]  # re-audited by another auditor
    leaf = {"start": 0, "update": 4}[check]
    _reaudit(refereed, "mismatch", check=check, first_bad_leaf=leaf)  # the re-audit agrees
    view = refereed.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()
    assert view["game"]["outcome"] == "upheld"
    assert view["game"]["steps"][-1]["actor"] == "auditors"
    assert _faulty(refereed) == []
    assert refereed.client.get(f"/v1/runs/{RUN}/reassigned").json() == []


def test_a_recomputed_overturn_bars_the_auditor(refereed: Service) -> None:
    verdict_id, segments = _verdict(refereed, None, bad_leaf=4)  # an older verdict: no check
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    assert opened.json()["game"]["stage"] == "recompute"  # the last leaf may be the update
    _reaudit(refereed, "match")
    view = refereed.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()
    assert view["game"]["outcome"] == "overturned"
    assert _faulty(refereed) == [AUDITOR.ss58_address]


@pytest.mark.parametrize("reaudit", ["match", "unverifiable"])
def test_an_unverifiable_verdict_is_recomputed_by_an_independent_reaudit(
    refereed: Service, reaudit: str
) -> None:
    """Every fault-bearing verdict is contestable: ``unverifiable`` goes to a re-audit."""
    verdict_id, segments = _verdict(refereed, "unverifiable")
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[-1])
    )
    assert opened.status_code == 200, opened.text
    game = opened.json()["game"]
    assert (game["stage"], game["check"]) == ("recompute", "unverifiable")
    queue = refereed.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["verdict_id"] for q in queue] == [verdict_id]  # set aside until re-audited
    _reaudit(refereed, reaudit)
    view = refereed.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()
    lied = reaudit == "match"  # the bytes were served: the auditor lied, and is barred
    assert view["game"]["outcome"] == ("overturned" if lied else "upheld")
    assert _faulty(refereed) == ([AUDITOR.ss58_address] if lied else [])


def test_a_match_verdict_cannot_be_disputed(refereed: Service) -> None:
    verdict_id, segments = _verdict(refereed, "start")
    _reaudit(refereed, "match")  # OTHER_AUDITOR's match on the same assignment
    conn = refereed.client.app.state.service.conn  # type: ignore[attr-defined]
    (match_id,) = conn.execute("SELECT verdict_id FROM verdicts WHERE result = 'match'").fetchone()
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(match_id, segments[0])
    )
    assert (opened.status_code, opened.json()["error"]) == (400, "not_mismatch")
    assert verdict_id != match_id


def test_a_dispute_without_referee_is_decided_within_its_bound(unrefereed: Service) -> None:
    verdict_id, segments = _verdict(unrefereed, "segment")
    opened = unrefereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    assert opened.status_code == 200, opened.text
    dispute_id, start = opened.json()["dispute_id"], opened.json()["opened_beacon_round"]
    game = play_to_referee(unrefereed.client, RUN, dispute_id, ISLANDS[0], AUDITOR)
    assert game["stage"] == "referee"
    r = unrefereed.client.put(f"/v1/disputes/{dispute_id}/inputs", content=encode(TENSORS))
    assert r.status_code == 200, r.text
    bound = Rules.model_validate(game["rules"]).bound_rounds()
    for _ in range(bound + 1):  # nobody can rule: the fallback decides, deterministically
        unrefereed.tick()
        view = unrefereed.client.get(f"/v1/disputes/{dispute_id}").json()
        if view["game"]["outcome"] is not None:
            break
    assert view["game"]["outcome"] == "upheld"
    assert view["decided_beacon_round"] - start <= bound
    levels = [s["level"] for s in view["game"]["steps"]]
    assert levels.count("referee") == 2 and levels[-1] == "decided"  # one extension
    dash = unrefereed.client.get(f"/v1/runs/{RUN}/dashboard").json()
    (panel,) = dash["disputes"]
    assert [s["level"] for s in panel["steps"]] == levels
    assert panel["steps"][-1]["outcome"] == "upheld" and panel["steps"][-1]["text"]


@pytest.mark.parametrize("query", ["round=99999999999999999999999", "round=-1", "stage=nope"])
def test_listing_refuses_what_names_no_round(refereed: Service, query: str) -> None:
    r = refereed.client.get(f"/v1/disputes?run_id={RUN}&{query}")
    assert (r.status_code, r.json()["error"]) == (400, "bad_query")
