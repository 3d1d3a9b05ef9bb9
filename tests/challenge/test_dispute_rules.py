"""The dispute rules through the real service: admissibility, recomputation, no referee.

* a dispute of any segment but the verdict's first differing one is refused;
* a mismatch of the leaf-0 or update check opens no game: a quorum of the run's other
  listed auditors (or a referee) re-audits it and decides, never the first to answer;
  its auditor is barred only on two agreeing re-audits, never for an ``unverifiable``
  verdict (availability at the deadline is not what a later re-audit sees);
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
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RULES,
    RUN,
    THIRD_AUDITOR,
    Service,
    barred,
    post_verdict,
    rules_run,
    verdict_of_check,
)
from tests.challenge.disputeplay import TENSORS, play_to_referee
from tests.challenge.disputeplay import open_body as _open_body


@pytest.fixture
def refereed(tmp_path: Path) -> Iterator[Service]:
    with rules_run(tmp_path, {**RULES, "referees": [REFEREE.ss58_address]}) as svc:
        yield svc


@pytest.fixture
def listed(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors and no referee: a verdict's jury is the other two."""
    workers = (AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR)
    with rules_run(tmp_path, {**RULES, "referees": []}, workers) as svc:
        yield svc


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Service]:
    """Two listed auditors and no referee: a verdict's jury is the other one."""
    with rules_run(tmp_path, {**RULES, "referees": []}, (AUDITOR, OTHER_AUDITOR)) as svc:
        yield svc


@pytest.fixture
def unrefereed(tmp_path: Path) -> Iterator[Service]:
    with rules_run(tmp_path, {**RULES, "referees": [], "referee_extensions": 1}) as svc:
        yield svc


def _reaudit(svc: Service, result: str, key: Hotkey = OTHER_AUDITOR, **fields: Any) -> None:
    """``key`` re-judges island 0; a mismatch names its check in ``fields``."""
    r = post_verdict(svc, key, ISLANDS[0], result, update_checked=True, **fields)
    assert r.status_code == 200, r.text


def _outcome(svc: Service, dispute_id: str) -> Any:
    return svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]


def test_a_dispute_of_an_honest_segment_is_refused(refereed: Service) -> None:
    verdict_id, segments = verdict_of_check(refereed, "segment")
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
def test_start_and_update_mismatches_are_recomputed_not_played(listed: Service, check: str) -> None:
    verdict_id, segments = verdict_of_check(listed, check)
    opened = listed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    assert opened.status_code == 200, opened.text
    game = opened.json()["game"]
    assert (game["stage"], game["check"]) == ("recompute", check)
    assert game["jury"] == sorted([OTHER_AUDITOR.ss58_address, THIRD_AUDITOR.ss58_address])
    queue = listed.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["verdict_id"] for q in queue] == [verdict_id]  # re-audited by the others
    leaf = {"start": 0, "update": 4}[check]
    for key in (OTHER_AUDITOR, THIRD_AUDITOR):  # both re-audits agree with the verdict
        assert listed.client.get(f"/v1/runs/{RUN}/reassigned").json() != []
        _reaudit(listed, "mismatch", key, check=check, first_bad_leaf=leaf)
    game = _outcome(listed, opened.json()["dispute_id"])
    assert game["outcome"] == "upheld"
    assert game["steps"][-1]["actor"] == "auditors"
    assert barred(listed) == []
    assert listed.client.get(f"/v1/runs/{RUN}/reassigned").json() == []


def test_a_recomputed_overturn_needs_a_quorum_and_then_bars_the_auditor(listed: Service) -> None:
    """The honest path: a lying auditor's update mismatch on an honest island is overturned
    once both other listed auditors re-audit ``match``, and the liar is barred."""
    verdict_id, segments = verdict_of_check(listed, None, bad_leaf=4)  # an older verdict: no check
    opened = listed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    dispute_id = opened.json()["dispute_id"]
    assert opened.json()["game"]["stage"] == "recompute"  # the last leaf may be the update
    _reaudit(listed, "match")
    assert _outcome(listed, dispute_id)["stage"] == "recompute"  # one of two is no quorum
    assert barred(listed) == []
    _reaudit(listed, "match", THIRD_AUDITOR)
    assert _outcome(listed, dispute_id)["outcome"] == "overturned"
    assert barred(listed) == [AUDITOR.ss58_address]


def test_contrary_reaudits_without_a_quorum_leave_the_verdict_standing(listed: Service) -> None:
    verdict_id, segments = verdict_of_check(listed, "update")
    opened = listed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    dispute_id = opened.json()["dispute_id"]
    _reaudit(listed, "match")  # a colluder answers first
    _reaudit(listed, "mismatch", THIRD_AUDITOR, check="update", first_bad_leaf=4)
    assert _outcome(listed, dispute_id)["stage"] == "recompute"
    listed.tick(Rules.model_validate(opened.json()["game"]["rules"]).bound_rounds())
    assert _outcome(listed, dispute_id)["outcome"] == "upheld"  # the status quo
    assert barred(listed) == []


def test_with_two_auditors_the_other_overturns_but_never_bars(pair: Service) -> None:
    verdict_id, segments = verdict_of_check(pair, "update")
    opened = pair.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    _reaudit(pair, "match")
    assert _outcome(pair, opened.json()["dispute_id"])["outcome"] == "overturned"
    assert barred(pair) == []  # one contrary claim never bars


def test_a_referees_reaudit_decides_alone(refereed: Service) -> None:
    verdict_id, segments = verdict_of_check(refereed, "start")
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[0])
    )
    dispute_id = opened.json()["dispute_id"]
    _reaudit(refereed, "match")  # no auditors listed: an ordinary key's re-audit counts nothing
    assert _outcome(refereed, dispute_id)["stage"] == "recompute"
    _reaudit(refereed, "match", REFEREE)  # the manifest's referee (never an island of the run)
    game = _outcome(refereed, dispute_id)
    assert (game["outcome"], game["steps"][-1]["actor"]) == ("overturned", "referee")
    assert barred(refereed) == [AUDITOR.ss58_address]


@pytest.mark.parametrize("reaudit", ["match", "unverifiable"])
def test_an_unverifiable_verdict_is_recomputed_by_an_independent_reaudit(
    listed: Service, reaudit: str
) -> None:
    """Every fault-bearing verdict is contestable: ``unverifiable`` goes to a re-audit; an
    overturn frees the island, and bars the auditor here because both jurors' ``match``
    came by the round's upload deadline (they fetched the bytes in time: the lie is
    proven). A later re-audit, which cannot see that moment, bars nobody
    (tests/attacks_found/test_late_upload_bars_auditor.py)."""
    verdict_id, segments = verdict_of_check(listed, "unverifiable")
    opened = listed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segments[-1])
    )
    assert opened.status_code == 200, opened.text
    game = opened.json()["game"]
    assert (game["stage"], game["check"]) == ("recompute", "unverifiable")
    queue = listed.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["verdict_id"] for q in queue] == [verdict_id]  # set aside until re-audited
    for key in (OTHER_AUDITOR, THIRD_AUDITOR):
        _reaudit(listed, reaudit, key)
    served = reaudit == "match"
    assert _outcome(listed, opened.json()["dispute_id"])["outcome"] == (
        "overturned" if served else "upheld"
    )
    assert barred(listed) == ([AUDITOR.ss58_address] if served else [])


def test_a_match_verdict_cannot_be_disputed(refereed: Service) -> None:
    verdict_id, segments = verdict_of_check(refereed, "start")
    _reaudit(refereed, "match")  # OTHER_AUDITOR's match on the same assignment
    conn = refereed.client.app.state.service.conn  # type: ignore[attr-defined]
    (match_id,) = conn.execute("SELECT verdict_id FROM verdicts WHERE result = 'match'").fetchone()
    opened = refereed.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(match_id, segments[0])
    )
    assert (opened.status_code, opened.json()["error"]) == (400, "not_mismatch")
    assert verdict_id != match_id


def test_a_dispute_without_referee_is_decided_within_its_bound(unrefereed: Service) -> None:
    verdict_id, segments = verdict_of_check(unrefereed, "segment")
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
