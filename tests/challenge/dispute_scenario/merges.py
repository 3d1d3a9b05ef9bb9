"""The aggregator's merge tapes of the scenario's rounds."""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario.cast import ISLANDS, RUN
from tests.challenge.dispute_scenario.runs import Played
from tests.challenge.helpers import AGGREGATOR, aggregator_split, bearer, signed


def tape(index: int = 0, **fields: Any) -> dict[str, Any]:
    """A merge tape of round ``index`` with made-up hashes; ``fields`` add or replace."""
    return {
        "round": index,
        "start_model_sha256": "aa" * 32,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "u",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        **fields,
    }


def post_tape(
    svc: Played, body: dict[str, Any], key: Hotkey = AGGREGATOR, run_id: str = RUN
) -> Any:
    """``key`` signs and posts the merge tape ``body``; the service's answer."""
    return svc.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(key, "merge-tape", body, run_id)
    )


def split_tape(svc: Played, index: int = 0, **fields: Any) -> dict[str, Any]:
    """The aggregator's tape of round ``index``: both islands included or excluded as its
    collection decides from the public round record."""
    split = aggregator_split(svc.client, RUN, index, [k.ss58_address for k in ISLANDS])
    return tape(index, **split, **fields)


def merge_round_0(svc: Played) -> None:
    """The aggregator merges round 0; the round waits to settle."""
    m = post_tape(svc, split_tape(svc))
    assert m.status_code == 200 and m.json()["phase"] == "settle", m.text


def merge_and_settle(svc: Played) -> None:
    """The aggregator merges round 0, then far past every window and dispute bound of it."""
    m = post_tape(svc, split_tape(svc))
    assert m.status_code == 200, m.text
    svc.tick(40)


def merge(svc: Played, index: int, pending: bool = False) -> None:
    """Merge round ``index``; ``pending``: islands without a verdict are ``audit_pending``."""
    detail = svc.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()
    judged = {v["envelope"]["body"]["hotkey"] for v in detail["verdicts"]}
    left_out = {k.ss58_address for k in ISLANDS} - judged if pending else set()
    body = tape(
        index,
        included=sorted({k.ss58_address for k in ISLANDS} - left_out),
        excluded=dict.fromkeys(sorted(left_out), "audit_pending"),
    )
    m = post_tape(svc, body)
    assert m.status_code == 200, m.text
