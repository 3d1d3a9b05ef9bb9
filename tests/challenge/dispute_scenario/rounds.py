"""Round 0 and later rounds of the scenario, and the verdicts auditors post on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario.cast import AUDITOR, ISLANDS, RUN
from tests.challenge.dispute_scenario.runs import Played, Service
from tests.challenge.disputeplay import TREE
from tests.challenge.helpers import bearer, commit_body, join_body, signed


def open_round(svc: Played, *, run_id: str = RUN, start_url: str = "u") -> int:
    """The operator opens the run's next round; its index."""
    r = svc.client.post(
        f"/admin/v1/runs/{run_id}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": start_url},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["body"]["round"])


def round_detail(svc: Played, index: int, *, run_id: str = RUN) -> dict[str, Any]:
    """``GET /v1/runs/{run}/rounds/{index}``: the round's public records, as JSON."""
    detail: dict[str, Any] = svc.client.get(f"/v1/runs/{run_id}/rounds/{index}").json()
    return detail


def assignment(svc: Played, island: Hotkey, index: int = 0) -> dict[str, Any]:
    """``island``'s audit assignment in round ``index`` (its body)."""
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json()
    body: dict[str, Any] = next(
        a["body"] for a in assigned if a["body"]["hotkey"] == island.ss58_address
    )
    return body


def commit_round_0(svc: Played, checkpoint_urls: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Round 0 with both islands joined and committed (the tree of ``disputeplay``) and its
    audits selected; island 0's assignment. ``checkpoint_urls``: each island's index URL,
    by address (the helpers' default otherwise)."""
    for key in ISLANDS:
        assert svc.post("/v1/join", key, "join", join_body()).status_code == 200
    open_round(svc, start_url="http://relay/m0")
    for key in ISLANDS:
        body = {**commit_body(0), "checkpoint_root": TREE.root_hex}
        if checkpoint_urls is not None:
            body["checkpoint_url"] = checkpoint_urls[key.ss58_address]
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200, body
    svc.tick(4)
    return assignment(svc, ISLANDS[0])


def open_and_commit(svc: Played, index: int) -> None:
    """Round ``index`` opened, both islands committed and its audits selected."""
    open_round(svc)
    for key in ISLANDS:  # each island its own update and root: no copy forces an audit
        body = commit_body(index, island=key.ss58_address)
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200
    svc.tick(4)


def send_verdict(svc: Played, auditor: Hotkey, body: dict[str, Any]) -> Any:
    """``auditor`` signs and posts the verdict ``body``; the service's answer."""
    return svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(auditor, "verdict", body, RUN)
    )


def verdict_body(
    svc: Played, island: Hotkey, result: str, *, index: int = 0, **fields: Any
) -> dict[str, Any]:
    """A verdict on ``island``'s assignment in round ``index``: ``result`` and ``fields``."""
    body = {**assignment(svc, island, index), "result": result, **fields}
    body.pop("selection_beacon_round")
    return body


def post_verdict(
    svc: Played, auditor: Hotkey, island: Hotkey, result: str, *, index: int = 0, **fields: Any
) -> Any:
    """``auditor``'s verdict ``result`` (with ``fields``) on ``island``; the answer."""
    return send_verdict(svc, auditor, verdict_body(svc, island, result, index=index, **fields))


def verdict_on(svc: Played, auditor: Hotkey, island: Hotkey, result: str) -> Any:
    """``auditor``'s verdict on ``island`` in round 0; a mismatch names the end of the first
    assigned segment as the first bad leaf."""
    body = verdict_body(svc, island, result)
    if result == "mismatch":
        body["first_bad_leaf"] = body["segments"][0] + 1
    return send_verdict(svc, auditor, body)


def judge(
    svc: Played, auditor: Hotkey, island: Hotkey, result: str, *, index: int = 0
) -> tuple[str, list[int]]:
    """``auditor``'s accepted verdict ``result`` on ``island`` as a replay gives it (for
    ``unverifiable`` the index withheld, otherwise the update checked); its id and the
    island's assigned segments."""
    withheld = result == "unverifiable"
    fields = {"detail": "index withheld"} if withheld else {"update_checked": True}
    body = verdict_body(svc, island, result, index=index, **fields)
    r = send_verdict(svc, auditor, body)
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], sorted(body["segments"])


def to_verdict(svc: Played) -> tuple[str, int]:
    """Round 0 with both islands committed and island 0 judged a mismatch by
    :data:`AUDITOR`; the verdict's id and the disputable segment."""
    segment = commit_round_0(svc)["segments"][0]
    r = verdict_on(svc, AUDITOR, ISLANDS[0], "mismatch")
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], segment


def verdict_of_check(
    svc: Played, check: str | None, bad_leaf: int | None = None
) -> tuple[str, list[int]]:
    """Round 0 committed; island 0 judged a mismatch of ``check`` by :data:`AUDITOR` (of
    ``unverifiable``: bytes withheld, no check and no leaf); the verdict's id and the
    island's assigned segments."""
    mine = commit_round_0(svc)
    segments = sorted(mine["segments"])
    leaf = {"start": 0, "update": 4}.get(check or "", segments[0] + 1)
    fields = {"first_bad_leaf": leaf if bad_leaf is None else bad_leaf}
    fields |= {"check": check, "update_checked": True}
    body = verdict_body(svc, ISLANDS[0], "mismatch", **fields)
    if check == "unverifiable":
        body = verdict_body(svc, ISLANDS[0], "unverifiable", detail="index withheld")
    r = send_verdict(svc, AUDITOR, body)
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], segments


def barred(svc: Service) -> list[str]:
    """The auditors the service holds faulty (their verdicts are refused)."""
    conn = svc.client.app.state.service.conn  # type: ignore[attr-defined]
    return [row[0] for row in conn.execute("SELECT auditor FROM faulty_auditors")]
