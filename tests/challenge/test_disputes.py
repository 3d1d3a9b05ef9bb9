"""Disputes through the service: open, every refusal, the game over HTTP, outcomes, restart."""

from __future__ import annotations

import hashlib

from hypertrain.api.disputes import HoneypotAnswer
from hypertrain.challenge.settlement.settle import PENDING_AUDIT
from hypertrain.dispute import opinputs
from tests.challenge.dispute_scenario import (
    AUDITOR,
    HONEYPOTS,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RUN,
    WINDOW,
    Service,
    bonded,
    merge_round_0,
    played_to_referee,
    post_tape,
    running,
    service,
    split_tape,
    to_verdict,
    verdict_on,
)
from tests.challenge.disputeplay import TENSORS
from tests.challenge.disputeplay import answer as _answer
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body
from tests.challenge.helpers import bearer, commit_body, signed

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
    assert rows[ISLANDS[0].ss58_address]["accused"] is False
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
