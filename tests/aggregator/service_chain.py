"""An aggregator against the in-process challenge service, rounds trained and merged by
hand: the shared steps of the rollback tests (a fault is booked the way every proving
path books one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.challenge.settlement import rollbacks
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.sqlite import transaction
from hypertrain.trainer.codec import encode_int8
from tests.aggregator.helpers import delta
from tests.challenge.conftest import Harness
from tests.challenge.helpers import AGGREGATOR, TOKENS, TOKENS_PER_MICRO_BATCH, join_body, signed

AGG = AGGREGATOR  # the key the test service names (HYPERTRAIN_AGGREGATOR_HOTKEYS)
WORKER = {"Authorization": f"Bearer {TOKENS['worker']}"}
Merged = tuple[Harness, Aggregator, MemoryBlobs, list[Any]]


def client_for(h: Harness, kind: type[ChallengeClient] = ChallengeClient) -> ChallengeClient:
    """A client of the harness's service with the worker and admin tokens."""
    return kind(
        "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
        http=h.client,
    )  # fmt: skip


def aggregator_for(
    h: Harness, tmp: Path, blobs: MemoryBlobs, events: list[Any], service: ChallengeClient
) -> Aggregator:
    return Aggregator(service, blobs, AGG, "run-1", tmp / "agg", events.append)


def train(h: Harness, agg: Aggregator, m: RunManifest, blobs: MemoryBlobs, index: int) -> None:
    """Every island commits round ``index``, every audit matches, the round is merged."""
    to_merge(h, agg, m, blobs, index)
    assert agg.step(m, open_rounds=True) == 1
    h.tick(3)  # settles: final


def to_merge(h: Harness, agg: Aggregator, m: RunManifest, blobs: MemoryBlobs, index: int) -> None:
    """Every island commits round ``index`` and every audit matches: it waits for its merge."""
    for i, key in enumerate(h.miners[:3]):
        data = encode_int8(delta(m, 100 * index + i), m.compression.block_size)
        sha = blobs.put(data, kind="update", round=index)
        leaves = m.round.num_segments + 1
        body = {"round": index, "checkpoint_root": "cd" * 32, "leaf_count": leaves,
                "update_sha256": sha, "update_bytes": len(data), "tokens": TOKENS_PER_MICRO_BATCH,
                "update_url": f"memory:{sha}", "train_loss": 3.0}  # fmt: skip
        assert h.client.post("/v1/commit", json=signed(key, "commit", body)).status_code == 200
    h.tick(1)
    for a in agg.service.round_detail("run-1", index).assignments:
        good = {"round": index, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", good),
                          headers=WORKER)  # fmt: skip
        assert r.status_code == 200, r.text
    h.tick(2)


def current_tape(agg: Aggregator, blobs: MemoryBlobs, index: int) -> Tape:
    current = agg.service.round_detail("run-1", index).current_merge()
    assert current is not None
    return decode_tape(blobs.get(current.tape_sha256))


def prove(h: Harness, index: int, hotkey: str) -> None:
    """Book a fault as every proving path does (settlement, a late verdict's window),
    under the service's lock as its own paths are (its background work shares the
    connection)."""
    with h.state.lock, transaction(h.state.conn):
        rollbacks.book_fault(
            h.state.conn, h.state.ledger, "run-1", index, hotkey, "late mismatch verdict", 1
        )


def two_merged_rounds(h: Harness, tmp: Path, service: ChallengeClient | None = None) -> Merged:
    """Two merged rounds (0, 1) with every island included; round 2 is open."""
    blobs, events = MemoryBlobs(), list[Any]()
    agg = aggregator_for(h, tmp, blobs, events, service or client_for(h))
    m = agg.service.manifest("run-1")
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    agg.step(m, open_rounds=True)
    train(h, agg, m, blobs, 0)
    train(h, agg, m, blobs, 1)
    return h, agg, blobs, events
