"""Drive a service through real rounds (joins, commits, audits, verdicts, merges)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    AGGREGATOR,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    signed,
)

START = "aa" * 32


BROADCAST_BYTES = 1234  # each merge's start-model broadcast, as its tape message says


def run_rounds(
    h: Harness,
    rounds: int = 2,
    islands: int = 3,
    checkpoint_root: str | None = None,
    after_verdicts: Callable[[Harness, int], None] | None = None,
    cheat_round: int = 0,
) -> None:
    """Every island commits each round; the last one is caught cheating in ``cheat_round``.

    ``checkpoint_root`` replaces every commit's root (a tree a dispute can prove
    leaves of); ``after_verdicts(h, round)`` runs once a round's verdicts are in.
    """
    for n, key in enumerate(h.miners[:islands]):  # island n trains n + 1 micro-batches a step
        joined = h.client.post("/v1/join", json=signed(key, "join", join_body(micro_batches=n + 1)))
        assert joined.status_code == 200
    model = START
    for index in range(rounds):
        body = (
            {"start_model_sha256": START, "start_model_url": "http://relay/m0"} if not index else {}
        )
        r = h.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json=body)
        assert r.status_code == 200, r.text
        for n, key in enumerate(h.miners[:islands]):
            commit = commit_body(index, tokens=1000 * (n + 1), loss=5.0 - index)
            if checkpoint_root is not None:
                commit["checkpoint_root"] = checkpoint_root
            assert h.client.post("/v1/commit", json=signed(key, "commit", commit)).is_success
        h.tick(1)  # every island committed: the next beacon round selects the audits
        assigned = h.client.get(
            f"/worker/v1/runs/run-1/rounds/{index}/assignments", headers=bearer("worker")
        ).json()
        for a in assigned:
            cheat = (
                index == cheat_round and a["body"]["hotkey"] == h.miners[islands - 1].ss58_address
            )
            verdict: dict[str, Any] = {
                "round": index,
                "hotkey": a["body"]["hotkey"],
                "segments": a["body"]["segments"],
                "result": "mismatch" if cheat else "match",
                "update_checked": not cheat,  # the final segment is always selected
            }
            if cheat:
                bad = min(a["body"]["segments"]) + 1  # a dispute may contest only this one
                verdict |= {"first_bad_leaf": bad, "detail": f"state hash differs at leaf {bad}"}
            r = h.client.post(
                "/worker/v1/verdict",
                headers=bearer("worker"),
                json=signed(h.auditor, "verdict", verdict),
            )
            assert r.status_code == 200, r.text
        if after_verdicts is not None:
            after_verdicts(h, index)
        h.tick(2)
        broadcast = {"broadcast_sha256": "ee" * 32, "broadcast_url": f"http://relay/b{index + 1}",
                     "broadcast_bytes": BROADCAST_BYTES}  # fmt: skip
        hotkeys = [k.ss58_address for k in h.miners[:islands]]
        model = post_merge(h, index, model, hotkeys, **broadcast)
        h.tick(3)  # past the dispute deadline: the round settles


def post_merge(h: Harness, index: int, model: str, hotkeys: list[str], **extra: Any) -> str:
    """The aggregator's tape of round ``index`` (from ``model``, merging ``hotkeys``, with
    ``extra`` fields), posted; the new model's hash."""
    new = f"{index + 1:02x}" * 32
    tape = {
        "round": index,
        "start_model_sha256": model,
        "new_model_sha256": new,
        "new_model_url": f"http://relay/m{index + 1}",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        "eval_loss": 4.5 - 0.5 * index,
        **aggregator_split(h.client, "run-1", index, hotkeys),
        **extra,
    }
    r = h.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(AGGREGATOR, "merge-tape", tape)
    )
    assert r.status_code == 200, r.text
    return new
