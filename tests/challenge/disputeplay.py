"""A dispute played over HTTP with made-up hashes: both parties agree up to a point.

The island and the auditor answer each query with hashes that agree before step 1,
in sections before the third and in every operation input, so a game narrows to step
0, the third section and its one operation, and then waits for the referee. Each
answer is committed to first (salted with :data:`SALT`) and revealed once both
parties committed.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from hypertrain.dispute import opinputs
from hypertrain.dispute.messages import DisputeAnswer, OpEntry, commitment_of
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.merkle import MerkleTree
from tests.challenge.helpers import signed

LEAVES = [hashlib.sha256(f"leaf{i}".encode()).digest() for i in range(5)]
TREE = MerkleTree.from_leaves(LEAVES)
TENSORS = [opinputs.RawTensor("torch.float32", (2,), bytes(8))]
SALT = "c3" * 32


class Http(Protocol):
    def get(self, url: str) -> Any: ...

    def post(self, url: str, *, json: Any) -> Any: ...


def open_body(verdict_id: str, segment: int, round: int = 0) -> dict[str, Any]:
    def leaf(i: int) -> dict[str, Any]:
        return {"leaf": LEAVES[i].hex(), "proof": TREE.proof(i).to_json()}

    return {
        "round": round,
        "verdict_id": verdict_id,
        "segment": segment,
        "start": leaf(segment),
        "end": leaf(segment + 1),
    }


def _hash(party: str, step: int, part_at: int) -> str:
    return hashlib.sha256(
        f"{step}".encode() if step < part_at else f"{step}{party}".encode()
    ).hexdigest()


def commitment(game: dict[str, Any], party: str, part_at: int = 1) -> dict[str, Any]:
    """``party``'s commitment to its salted :func:`answer` for the open query."""
    reveal = DisputeAnswer.model_validate(answer(game, party, part_at, game["island_end"]))
    return commitment_of(reveal).model_dump(mode="json")


def answer(game: dict[str, Any], party: str, part_at: int, end: str) -> dict[str, Any]:
    """``party``'s salted answer to the open query (``end``: the island's committed leaf)."""
    base = {"dispute_id": game["dispute_id"], "query": game["query"], "segment": game["segment"]}
    base["salt"] = SALT
    if game["stage"] == "step":
        hashes = [
            end if (p == game["interval"] and party == "island") else _hash(party, p, part_at)
            for p in game["points"]
        ]
        return {**base, "level": "step", "hashes": hashes}
    if game["stage"] == "layer":
        sections = [
            {"name": n, "digest": _hash(party, i, 2)} for i, n in enumerate(game["sections"])
        ]
        return {**base, "level": "layer", "step": game["step"], "sections": sections}
    out = _hash(party, 9, 0)
    op = OpEntry(
        op="aten.neg.default", args='[[{"$t":0}],{}]', inputs=[TENSORS[0].digest()], outputs=[out]
    )
    return {
        **base,
        "level": "op",
        "step": game["step"],
        "section": game["section"],
        "ops": [op.model_dump()],
    }


def play_to_referee(
    http: Http, run_id: str, dispute_id: str, island: Hotkey, auditor: Hotkey
) -> dict[str, Any]:
    """Both parties commit and reveal every query until the game waits for the referee."""
    while True:
        game: dict[str, Any] = http.get(f"/v1/disputes/{dispute_id}").json()["game"]
        if game["stage"] not in ("step", "layer", "op"):
            return game
        revealing = len(game["commitments"]) == 2
        for key, party in ((island, "island"), (auditor, "auditor")):
            if party in game["answers" if revealing else "commitments"]:
                continue
            body = (
                answer(game, party, 1, game["island_end"]) if revealing else commitment(game, party)
            )
            r = http.post(
                f"/v1/disputes/{dispute_id}/answer",
                json=signed(key, "dispute-answer", body, run_id=run_id),
            )
            assert r.status_code == 200, r.text
