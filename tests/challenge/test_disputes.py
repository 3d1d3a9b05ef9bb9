"""Disputes through the service: open, every refusal, the game over HTTP, outcomes, restart."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.api.disputes import HoneypotAnswer
from hypertrain.auditor.disputes import answer_disputes
from hypertrain.challenge.settlement.settle import PENDING_AUDIT
from hypertrain.dispute import opinputs
from tests.challenge.dispute_scenario import (
    AUDITOR,
    HONEYPOTS,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RUN,
    THIRD_AUDITOR,
    WINDOW,
    Service,
    addresses,
    bonded,
    dispute_run,
    merge_round_0,
    played_to_referee,
    post_tape,
    running,
    service,
    split_tape,
    stand_in_auditor,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import TENSORS
from tests.challenge.disputeplay import answer as _answer
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import AGGREGATOR, bearer, commit_body, signed

__all__ = ["bonded", "service"]  # the fixtures, by name


def test_open_refusals(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    body = _open_body(verdict_id, segment)
    other = service.post("/v1/disputes", ISLANDS[1], "dispute-open", body)
    assert (other.status_code, other.json()["error"]) == (403, "not_judged")
    wrong = _open_body(verdict_id, segment)
    wrong["end"] = wrong["start"]
    bad_proof = service.post("/v1/disputes", ISLANDS[0], "dispute-open", wrong)
    assert (bad_proof.status_code, bad_proof.json()["error"]) == (400, "bad_proof")
    forged = signed(ISLANDS[0], "dispute-open", body, run_id=RUN)
    forged["signature"] = "00" * 64
    r = service.client.post("/v1/disputes", json=forged)
    assert (r.status_code, r.json()["error"]) == (401, "bad_signature")
    ok = service.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert ok.status_code == 200, ok.text
    dup = service.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert (dup.status_code, dup.json()["error"]) == (409, "duplicate")


def test_late_dispute_is_refused(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    service.tick(40)  # past audit close + dispute window
    r = service.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert (r.status_code, r.json()["error"]) == (409, "late")


def test_game_over_http_upheld_by_the_referee_then_settles(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    dispute_id = opened.json()["dispute_id"]
    # a bad answer is refused and changes nothing
    before = service.client.get(f"/v1/disputes/{dispute_id}").json()
    early = _answer(before["game"], "auditor", 1, "")  # a reveal before both committed
    r = service.post(f"/v1/disputes/{dispute_id}/answer", AUDITOR, "dispute-answer", early)
    assert (r.status_code, r.json()["error"]) == (400, "wrong_query")
    assert service.client.get(f"/v1/disputes/{dispute_id}").json() == before
    game = played_to_referee(service, dispute_id)
    assert game["stage"] == "referee" and game["step"] == 0
    # inputs that do not hash to the agreed ones are refused
    wrong = opinputs.encode([opinputs.RawTensor("torch.float32", (2,), b"\x01" * 8)])
    r = service.client.put(f"/v1/disputes/{dispute_id}/inputs", content=wrong)
    assert (r.status_code, r.json()["error"]) == (400, "input_mismatch")
    r = service.client.put(f"/v1/disputes/{dispute_id}/inputs", content=opinputs.encode(TENSORS))
    assert r.status_code == 200, r.text
    got = service.client.get(f"/v1/disputes/{dispute_id}/inputs")
    assert got.status_code == 200, got.text
    data = got.content
    assert data == opinputs.encode(TENSORS)
    ruling = {
        "dispute_id": dispute_id,
        "query": r.json()["game"]["query"],
        "inputs_sha256": hashlib.sha256(data).hexdigest(),
        "outputs": game["outputs"]["auditor"],
    }
    stranger = service.post(f"/v1/disputes/{dispute_id}/ruling", AUDITOR, "dispute-ruling", ruling)
    assert (stranger.status_code, stranger.json()["error"]) == (403, "unknown_referee")
    # the merge arrives while the dispute is open: settlement waits
    service.tick(20)
    m = post_tape(service, split_tape(service, new_model_url="http://relay/m1"))
    assert m.status_code == 200 and m.json()["phase"] == "settle", m.text
    assert (RUN, 0) not in service.ledger.settled
    decided = service.post(f"/v1/disputes/{dispute_id}/ruling", REFEREE, "dispute-ruling", ruling)
    assert decided.status_code == 200, decided.text
    assert decided.json()["game"]["outcome"] == "upheld"
    service.tick()
    assert service.ledger.settled[(RUN, 0)] == {ISLANDS[1].ss58_address: commit_body(0)["tokens"]}
    assert service.ledger.faults == [(RUN, 0, ISLANDS[0].ss58_address)]


def test_silent_auditor_loses_and_is_barred_only_after_a_reaudit_agrees(
    service: Service,
) -> None:
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    dispute_id = opened.json()["dispute_id"]
    game = opened.json()["game"]
    r = service.post(
        f"/v1/disputes/{dispute_id}/answer",
        ISLANDS[0],
        "dispute-answer",
        _commitment(game, "island"),
    )
    assert r.status_code == 200, r.text
    service.tick(4)  # past the answer deadline
    view = service.client.get(f"/v1/disputes/{dispute_id}").json()
    assert view["game"]["outcome"] == "overturned" and view["decided_beacon_round"] is not None
    late = service.post(
        f"/v1/disputes/{dispute_id}/answer",
        AUDITOR,
        "dispute-answer",
        _commitment(game, "auditor"),
    )
    assert (late.status_code, late.json()["error"]) == (409, "decided")
    service.tick(20)
    m = post_tape(service, split_tape(service))
    assert m.json()["phase"] == "settle"
    service.tick()  # the dispute window is over and the dispute decided: the round settles
    assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    assert service.ledger.faults == []
    # one lost game bars nobody: the verdict waits for an independent re-audit, and the
    # island's reward is held until it comes
    conn = service.client.app.state.service.conn  # type: ignore[attr-defined]
    assert conn.execute("SELECT auditor FROM faulty_auditors").fetchall() == []
    assert service.ledger.held[(RUN, 0)][ISLANDS[0].ss58_address] == PENDING_AUDIT
    queue = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [(q["hotkey"], q["verdict_id"], q["missed"]) for q in queue] == sorted(
        [(ISLANDS[0].ss58_address, verdict_id, False), (ISLANDS[1].ss58_address, "", True)],
        key=lambda item: item[0],
    )  # island 1 was never judged: its missed audit is offered too
    # no auditor set is listed, so no jury: only a referee's re-audit is evidence enough
    assert verdict_on(service, REFEREE, ISLANDS[0], "match").status_code == 200
    assert [r[0] for r in conn.execute("SELECT auditor FROM faulty_auditors")] == [
        AUDITOR.ss58_address
    ]
    assert (RUN, 0, ISLANDS[0].ss58_address) in service.ledger.released
    _check_honeypots(service)


def test_restart_resumes_the_game(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    dispute_id = opened.json()["dispute_id"]
    game = opened.json()["game"]
    r = service.post(
        f"/v1/disputes/{dispute_id}/answer",
        AUDITOR,
        "dispute-answer",
        _commitment(game, "auditor"),
    )
    assert r.status_code == 200
    before = service.client.get(f"/v1/disputes/{dispute_id}").json()
    service.client.__exit__(None, None, None)
    with running(service):
        assert service.client.get(f"/v1/disputes/{dispute_id}").json() == before
        game = played_to_referee(service, dispute_id)
        assert game["stage"] == "referee"


def _check_honeypots(service: Service) -> None:
    """Round 0 is final: the list is revealed against the commitment and tabulated."""
    path = f"/admin/v1/runs/{RUN}/honeypots"
    wrong = HONEYPOTS.model_copy(update={"salt": "00" * 32}).model_dump(mode="json")
    r = service.client.post(path, json=wrong, headers=bearer("admin"))
    assert (r.status_code, r.json()["error"]) == (400, "bad_reveal")
    good = HONEYPOTS.model_dump(mode="json")
    assert service.client.post(path, json=good).status_code == 401  # the admin token
    r = service.client.post(path, json=good, headers=bearer("admin"))
    assert r.status_code == 200, r.text
    again = service.client.post(path, json=good, headers=bearer("admin"))
    assert again.status_code == 409
    rows = service.client.get(f"/v1/runs/{RUN}/honeypots").json()["table"]
    by = {(row["role"], row["strategy"]): row for row in rows}
    honest = by[("island", "honest")]
    # the flag was overturned: a dispute won, not a false positive (settlement's rule)
    assert (honest["rounds_run"], honest["false_positives"], honest["disputes_won"]) == (1, 0, 1)
    assert honest["caught"] is None
    cheat = by[("island", "wrong-samples")]
    assert (cheat["rounds_run"], cheat["caught"], cheat["missed"]) == (1, 0, 1)
    lying = by[("auditor", "lying")]
    assert (lying["verdicts"], lying["disputes_lost"]) == (1, 1)
    served = HoneypotAnswer.model_validate_json(
        service.client.get(f"/v1/runs/{RUN}/honeypots").content
    )  # the one shared model: the list as revealed, the table as computed
    shown = [{k: v for k, v in row.items() if v is not None} for row in rows]
    assert [p.revealed for p in served.periods] == [HONEYPOTS]
    assert [r.model_dump(exclude_none=True) for r in served.table] == shown


def test_reveal_before_the_round_is_final_is_refused(service: Service) -> None:
    r = service.client.post(
        f"/admin/v1/runs/{RUN}/honeypots",
        json=HONEYPOTS.model_dump(mode="json"),
        headers=bearer("admin"),
    )
    assert (r.status_code, r.json()["error"]) == (409, "early")


def test_faulty_auditors_other_verdicts_are_reassigned(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    # the lying auditor also passed island 1; that pass is what the dispute puts in doubt
    passed = verdict_on(service, AUDITOR, ISLANDS[1], "match")
    assert passed.status_code == 200, passed.text
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game = opened.json()["game"]
    dispute_id = opened.json()["dispute_id"]
    island_answer = _commitment(game, "island")
    r = service.post(
        f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", island_answer
    )
    assert r.status_code == 200, r.text
    service.tick(4)  # the auditor misses its deadline: overturned, its verdict set aside
    assert service.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == (
        "overturned"
    )
    queue = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [q["verdict_id"] for q in queue] == [verdict_id]  # only the disputed one
    # a referee's re-audit agrees with the island: now the auditor is faulty (no jury is
    # listed here; with one, a strict majority of it, never fewer than two, would do)
    assert verdict_on(service, REFEREE, ISLANDS[0], "match").status_code == 200
    queue = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert [(q["round"], q["hotkey"], q["auditor"], q["verdict_id"]) for q in queue] == [
        (0, ISLANDS[1].ss58_address, AUDITOR.ss58_address, passed.json()["verdict_id"])
    ]
    assert queue[0]["assignment"]["body"]["hotkey"] == ISLANDS[1].ss58_address
    assert queue[0]["dispute_id"] == dispute_id
    # the dashboard shows both verdicts as no longer counting, and island 0 not caught
    dash = service.client.get(f"/v1/runs/{RUN}/dashboard").json()
    rows = {a["hotkey"]: a for a in dash["audits"]}
    counting = {k: sorted(v["counts"] for v in rows[k]["verdicts"]) for k in rows}
    assert counting[ISLANDS[0].ss58_address] == [False, True]  # the re-audit counts
    assert counting[ISLANDS[1].ss58_address] == [False]
    assert rows[ISLANDS[0].ss58_address]["fault"] is False
    (panel,) = dash["disputes"]
    assert (panel["dispute_id"], panel["outcome"], panel["stage"]) == (
        dispute_id,
        "overturned",
        "decided",
    )
    assert [st["level"] for st in panel["steps"]] == ["open", "decided"]
    # the faulty auditor's verdicts are refused from now on, whatever they say
    again = verdict_on(service, AUDITOR, ISLANDS[1], "mismatch")
    assert (again.status_code, again.json()["error"]) == (403, "faulty_auditor")
    # the pass no longer counts: settlement holds island 1's reward instead of paying it
    service.tick(20)
    merge_round_0(service)
    service.tick()
    assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    held = service.ledger.held[(RUN, 0)]  # island 0 is held for its probation only
    assert held[ISLANDS[1].ss58_address] == PENDING_AUDIT != held[ISLANDS[0].ss58_address]
    assert service.ledger.faults == []
    # another auditor's verdict decides: here it finds the cheat, and the held reward burns
    other = verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "mismatch")
    assert other.status_code == 200, other.text
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    # the late verdict has its own dispute window: no fault while it can still be disputed
    assert service.ledger.faults == []
    service.tick(WINDOW + 1)  # the window closed undisputed: now it faults
    assert service.ledger.faults == [(RUN, 0, ISLANDS[1].ss58_address)]


def test_reassigned_pass_then_an_honest_match_releases_the_hold(service: Service) -> None:
    verdict_id, segment = to_verdict(service)
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game, dispute_id = opened.json()["game"], opened.json()["dispute_id"]
    island_answer = _commitment(game, "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", island_answer)
    service.tick(4)
    # within the audit window another auditor re-judges both: its matches count, and
    # nothing is held (the first one also confirms the dispute: the auditor is faulty)
    for island in ISLANDS:
        assert verdict_on(service, OTHER_AUDITOR, island, "match").status_code == 200
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    service.tick(20)
    merge_round_0(service)
    service.tick()
    assert set(service.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in ISLANDS}
    assert PENDING_AUDIT not in service.ledger.held[(RUN, 0)].values()
    assert service.ledger.faults == []


def test_bond_is_locked_at_open_and_returned_when_the_dispute_is_won(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    body = _open_body(verdict_id, segment)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 500}  # escrow from earlier
    opened = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", body)
    assert opened.status_code == 200, opened.text
    dispute_id, game = opened.json()["dispute_id"], opened.json()["game"]
    assert opened.json()["bond"] == 100
    assert bonded.ledger.bonds == {dispute_id: (ISLANDS[0].ss58_address, 100, "locked")}
    island_answer = _commitment(game, "island")
    r = bonded.post(
        f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", island_answer
    )
    assert r.status_code == 200, r.text
    bonded.tick(4)  # the auditor misses its deadline: the island wins, its bond comes back
    assert bonded.ledger.bonds[dispute_id][2] == "returned"
    bonded.tick()
    assert bonded.ledger.bonds[dispute_id][2] == "returned"  # settled once


@pytest.mark.parametrize("escrow", [0, 40])
def test_an_island_holding_less_than_the_bond_disputes_for_what_it_holds(
    bonded: Service, escrow: int
) -> None:
    """The bond never makes a verdict unanswerable: it is ``min(dispute.bond, escrow)``."""
    verdict_id, segment = to_verdict(bonded)
    if escrow:
        bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: escrow}
    opened = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    assert opened.json()["bond"] == escrow
    locked = {opened.json()["dispute_id"]: (ISLANDS[0].ss58_address, escrow, "locked")}
    assert bonded.ledger.bonds == (locked if escrow else {})
    again = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert (again.status_code, again.json()["error"]) == (409, "duplicate")  # once per verdict


def test_a_second_dispute_locks_only_the_escrow_no_bond_holds_yet(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 150}
    first = bonded.post("/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment))
    assert (first.status_code, first.json()["bond"]) == (200, 100), first.text
    other = verdict_on(bonded, OTHER_AUDITOR, ISLANDS[0], "mismatch")  # a second lie
    assert other.status_code == 200, other.text
    second = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(other.json()["verdict_id"], segment)
    )
    assert (second.status_code, second.json()["bond"]) == (200, 50), second.text


def test_bond_burns_when_the_island_loses(bonded: Service) -> None:
    verdict_id, segment = to_verdict(bonded)
    bonded.ledger.settled[(RUN, 99)] = {ISLANDS[0].ss58_address: 500}
    opened = bonded.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    assert opened.status_code == 200, opened.text
    dispute_id = opened.json()["dispute_id"]
    bonded.tick(4)  # the island never answers: upheld, the bond burns
    view = bonded.client.get(f"/v1/disputes/{dispute_id}").json()
    assert view["game"]["outcome"] == "upheld"
    assert bonded.ledger.bonds == {dispute_id: (ISLANDS[0].ss58_address, 100, "burned")}


@pytest.fixture
def juried(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors (and the aggregator): each verdict's jury is the other two."""
    keys = addresses(AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR, AGGREGATOR)
    with dispute_run(
        tmp_path, worker_hotkeys=keys, aggregator_hotkeys=addresses(AGGREGATOR)
    ) as svc:
        yield svc


def test_the_honest_auditor_rejudges_what_the_faulty_one_passed(
    juried: Service, tmp_path: Path
) -> None:
    service = juried
    verdict_id, segment = to_verdict(service)
    assert verdict_on(service, AUDITOR, ISLANDS[1], "match").status_code == 200
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game, dispute_id = opened.json()["game"], opened.json()["dispute_id"]
    body = _commitment(game, "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body)
    service.tick(4)  # overturned: the lying auditor's verdict waits for a re-audit
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, fields))

    own_judged: list[tuple[int, str]] = []
    answer_disputes(stand_in_auditor(service, AUDITOR, tmp_path, own_judged), {}, emit)
    assert own_judged == []  # an auditor never re-audits its own disputed verdict
    honest_judged: list[tuple[int, str]] = []
    honest = stand_in_auditor(service, OTHER_AUDITOR, tmp_path, honest_judged)
    assert answer_disputes(honest, {}, emit) == 1  # the disputed island: a match
    conn = service.client.app.state.service.conn  # type: ignore[attr-defined]
    assert conn.execute("SELECT auditor FROM faulty_auditors").fetchall() == []  # one word
    third = stand_in_auditor(service, THIRD_AUDITOR, tmp_path, [])
    assert answer_disputes(third, {}, emit) == 1  # the other juror agrees: a strict majority
    # the jury's majority agreed with the island: the auditor is faulty, its pass set aside
    assert answer_disputes(honest, {}, emit) == 1
    assert honest_judged == [(0, ISLANDS[0].ss58_address), (0, ISLANDS[1].ss58_address)]
    assert ("verdict", {"round": 0, "hotkey": ISLANDS[1].ss58_address, "result": "match",
            "reassigned_from": AUDITOR.ss58_address}) in events  # fmt: skip
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []
    assert answer_disputes(honest, {}, emit) == 0  # nothing left to re-judge


def test_an_auditor_judges_an_audit_that_missed_its_window(
    service: Service, tmp_path: Path
) -> None:
    """A held reward always has someone tasked with ending it: an assignment with no
    verdict when its audit phase ended is offered at ``/reassigned`` (``missed``), and an
    auditor's dispute pass judges it; the queue is then empty."""
    to_verdict(service)  # island 1 is never judged inside the audit window
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []  # still in time
    service.tick(40)  # the audit window is over
    assert service.client.get(f"/v1/runs/{RUN}/rounds/0").json()["phase"] != "audit"
    (missed,) = service.client.get(f"/v1/runs/{RUN}/reassigned").json()
    assert (missed["hotkey"], missed["missed"], missed["verdict_id"]) == (
        ISLANDS[1].ss58_address, True, "",
    )  # fmt: skip
    judged: list[tuple[int, str]] = []
    events: list[tuple[str, dict[str, Any]]] = []
    auditor = stand_in_auditor(service, OTHER_AUDITOR, tmp_path, judged)
    assert answer_disputes(auditor, {}, lambda kind, **f: events.append((kind, f))) == 1
    assert judged == [(0, ISLANDS[1].ss58_address)]
    assert service.client.get(f"/v1/runs/{RUN}/reassigned").json() == []


def test_an_auditor_that_lost_a_game_still_rejudges_others_audits(
    service: Service, tmp_path: Path
) -> None:
    """Losing one game (a slow machine) bars nobody, so it does not stop the auditor from
    judging what ``/reassigned`` offers it: here a missed audit of the other island."""
    verdict_id, segment = to_verdict(service)
    opened = service.post(
        "/v1/disputes", ISLANDS[0], "dispute-open", _open_body(verdict_id, segment)
    )
    game, dispute_id = opened.json()["game"], opened.json()["dispute_id"]
    body = _commitment(game, "island")
    service.post(f"/v1/disputes/{dispute_id}/answer", ISLANDS[0], "dispute-answer", body)
    service.tick(40)  # the auditor was silent (overturned) and island 1 missed its window
    assert service.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["outcome"] == (
        "overturned"
    )
    judged: list[tuple[int, str]] = []
    answer_disputes(
        stand_in_auditor(service, AUDITOR, tmp_path, judged), {}, lambda kind, **f: None
    )
    assert judged == [(0, ISLANDS[1].ss58_address)]  # never its own set-aside verdict


def test_a_late_fault_overturned_in_its_own_window_never_faults(service: Service) -> None:
    """A late verdict on a final round faults only once its own window closed undisputed;
    one overturned by an independent re-audit in that window books no fault at all."""
    to_verdict(service)  # island 1 has no verdict: held once the round settles
    service.tick(40)
    merge_round_0(service)
    service.tick()
    late = verdict_on(service, OTHER_AUDITOR, ISLANDS[1], "unverifiable")
    assert late.status_code == 200, late.text
    assigned = service.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    segment = next(a for a in assigned if a["body"]["hotkey"] == ISLANDS[1].ss58_address)
    body = _open_body(late.json()["verdict_id"], segment["body"]["segments"][0])
    opened = service.post("/v1/disputes", ISLANDS[1], "dispute-open", body)
    assert opened.status_code == 200, opened.text
    assert opened.json()["game"]["stage"] == "recompute"
    service.tick(WINDOW + 1)  # past the window, but the dispute is undecided: no fault yet
    island_1 = (RUN, 0, ISLANDS[1].ss58_address)
    assert island_1 not in service.ledger.faults
    reaudit = verdict_on(service, REFEREE, ISLANDS[1], "match")  # the referee re-audits
    assert reaudit.status_code == 200, reaudit.text
    view = service.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()
    assert view["game"]["outcome"] == "overturned"
    service.tick(WINDOW + 1)
    assert island_1 not in service.ledger.faults
