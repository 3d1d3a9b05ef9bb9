"""Attacks on merge and payment, through the real service, aggregator and codec.

Islands join the real challenge service, commit and upload real int8 updates; the real
aggregator collects, merges and posts its tape; the round settles after its dispute
window. Attackers: a ×1000 update, a copy and a rescaled copy of an honest update
committed later, and a commit whose update is never uploaded. None is paid, the model
equals the merge of the honest updates alone, and the honest islands are paid in full.
An exact copy makes both holders of the update audited (docs/mechanism.md, "Audit
selection"), so the copier is faulted by its replay rather than merged once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.merge import MergeInputs, merge
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.tape import Candidate, decode_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import param_shapes
from tests.aggregator.helpers import delta
from tests.challenge.helpers import (
    TOKENS,
    TOKENS_PER_MICRO_BATCH,
    FakeLedger,
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

AGG = Hotkey.from_seed(b"\x66" * 32)  # named below: KEYS hold the default aggregator key
KEYS = [Hotkey.from_seed(bytes([90 + i]) * 32) for i in range(6)]


@dataclass
class World:
    client: TestClient
    beacon: SteppedBeacon
    ledger: FakeLedger
    blobs: MemoryBlobs
    agg: Aggregator
    manifest: RunManifest

    def tick(self, rounds: int = 1) -> None:
        self.beacon.round += rounds
        state: ServiceState = self.client.app.state.service  # type: ignore[attr-defined]
        self.client.portal.call(_poll_beacon, state)  # type: ignore[union-attr]

    def commit(self, key: Hotkey, data: bytes, *, upload: bool = True) -> str:
        sha = (
            self.blobs.put(data, kind="update", round=0)
            if upload
            else hashlib.sha256(data).hexdigest()
        )
        body = {
            "round": 0, "checkpoint_root": hashlib.sha256(key.public_key).hexdigest(),
            "leaf_count": self.manifest.round.num_segments + 1, "update_sha256": sha,
            "update_bytes": len(data), "tokens": TOKENS_PER_MICRO_BATCH,
            "update_url": f"memory:{sha}", "train_loss": 3.0,
        }  # fmt: skip
        r = self.client.post("/v1/commit", json=signed(key, "commit", body))
        assert r.status_code == 200, r.text
        return sha

    def update(self, seed: int, scale: float = 1e-3) -> bytes:
        tensors = delta(self.manifest, seed, scale)
        return encode_int8(tensors, self.manifest.compression.block_size)


def _honest_norm(doc: dict[str, object]) -> float:
    """The norm of an honest update in this run: the operator's trusted reference."""
    m = RunManifest.model_validate({**doc, "outer": {"reference_norm": 1.0}})
    data = encode_int8(delta(m, 1), m.compression.block_size)
    return update_norm(data, param_shapes(m.model), m.compression)


def _world(tmp_path: Path, *, reference: bool = False, **audit: float) -> Iterator[World]:
    settings = make_settings(
        tmp_path, [k.ss58_address for k in KEYS], aggregator_hotkeys=frozenset({AGG.ss58_address})
    )
    beacon, ledger, blobs = SteppedBeacon(), FakeLedger(), MemoryBlobs()
    app = create_app(settings, beacon=beacon, ledger=ledger)
    with TestClient(app) as client:
        doc = manifest_doc(**audit)
        if reference:  # no audit this round, no probation: the manifest vouches for a norm
            doc["outer"] = {"reference_norm": _honest_norm(doc)}
        created = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert created.status_code == 200, created.text
        service = ChallengeClient(
            "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
            http=client,
        )  # fmt: skip
        agg = Aggregator(service, blobs, AGG, "run-1", tmp_path / "agg")
        manifest = service.manifest("run-1")
        for key in KEYS:
            assert client.post("/v1/join", json=signed(key, "join", join_body())).is_success
        agg.step(manifest, open_rounds=True)  # opens round 0 with the genesis model
        yield World(client, beacon, ledger, blobs, agg, manifest)


@pytest.fixture
def unaudited(tmp_path: Path) -> Iterator[World]:
    yield from _world(tmp_path, reference=True, rate=0.0, probation_rounds=0)


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[World]:
    yield from _world(tmp_path, rate=1.0, probation_rounds=0)


def _model_of(w: World, hotkeys: list[str]) -> str:
    """The model a merge of only these islands' (honest) candidates produces."""
    record = w.agg.service.round_detail("run-1", 0).merge
    assert record is not None
    tape = decode_tape(w.blobs.get(record.body["tape_sha256"]))
    keep = [c for c in tape.candidates if c.hotkey in hotkeys]
    inputs = MergeInputs(w.manifest, 0, tape.start_model_sha256, None, keep, proven=list(hotkeys))
    return merge(inputs, w.blobs).tape.new_model_sha256


def _settle(w: World, committed: bool = False) -> None:
    if not committed:
        w.tick(4)  # commit deadline passed
    w.tick(2)  # audit window closed: merge phase
    assert w.agg.step(w.manifest, open_rounds=False) == 1
    w.tick(3)  # dispute window closed
    assert w.agg.service.rounds("run-1")[0].phase == "final"


def test_unaudited_attackers_are_not_merged_or_paid(unaudited: World) -> None:
    w = unaudited
    honest, big, copier, scaled = KEYS[1:4], KEYS[0], KEYS[4], KEYS[5]
    original = w.update(1)
    w.commit(honest[0], original)  # the original commits first
    w.commit(honest[1], w.update(2))
    w.commit(honest[2], w.update(3))
    w.commit(big, w.update(9, scale=1.0))  # ×1000
    w.commit(copier, original)  # an exact copy, committed later
    rescaled = encode_int8(
        {k: v * 3.0 for k, v in delta(w.manifest, 1, 1e-3).items()},
        w.manifest.compression.block_size,
    )
    w.commit(scaled, rescaled)
    w.tick()  # every island committed: the two holders of one update are audited
    assigned = w.agg.service.round_detail("run-1", 0).assignments
    assert sorted(a.body["hotkey"] for a in assigned) == sorted(
        [honest[0].ss58_address, copier.ss58_address]
    )
    for a in assigned:  # the copier's replay of its own assignment misses its leaves
        verdict = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"]}
        verdict["result"] = "match" if a.body["hotkey"] == honest[0].ss58_address else "mismatch"
        if verdict["result"] == "mismatch":
            verdict["first_bad_leaf"] = a.body["segments"][0] + 1
        auditor = Hotkey.from_seed(b"\x55" * 32)
        r = w.client.post(
            "/worker/v1/verdict", headers=bearer("worker"), json=signed(auditor, "verdict", verdict)
        )
        assert r.status_code == 200, r.text
    _settle(w, committed=True)
    merged = w.agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    honest_keys = sorted(k.ss58_address for k in honest)
    assert sorted(merged["included"]) == honest_keys
    assert merged["excluded"] == {
        big.ss58_address: "norm_outlier",
        copier.ss58_address: "audit_mismatch",
        scaled.ss58_address: "near_duplicate",
    }
    assert ("run-1", 0, copier.ss58_address) in w.ledger.faults
    assert w.ledger.settled[("run-1", 0)] == dict.fromkeys(honest_keys, TOKENS_PER_MICRO_BATCH)
    assert merged["new_model_sha256"] == _model_of(w, honest_keys)  # not steered
    weights = w.ledger.get_weights(1, [k.ss58_address for k in KEYS]).weights
    assert set(weights) == set(honest_keys)


def test_one_honest_update_beside_a_1000x_one(audited: World) -> None:
    """Two decodable updates: the honest one is proven by its audit, the ×1000 is not."""
    w = audited
    honest, big = KEYS[0], KEYS[1]
    w.commit(honest, w.update(1))
    w.commit(big, w.update(2, scale=1.0))
    w.tick(4)
    detail = w.agg.service.round_detail("run-1", 0)
    for a in detail.assignments:
        # the ×1000 island's audit replayed its segments but not its update (a verdict
        # must exist: an assigned audit without one keeps an island out of the merge)
        checked = a.body["hotkey"] == honest.ss58_address
        verdict = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                   "result": "match", "update_checked": checked}  # fmt: skip
        auditor = Hotkey.from_seed(b"\x55" * 32)
        r = w.client.post(
            "/worker/v1/verdict", headers=bearer("worker"), json=signed(auditor, "verdict", verdict)
        )
        assert r.status_code == 200, r.text
    w.tick(2)
    assert w.agg.step(w.manifest, open_rounds=False) == 1
    w.tick(3)
    merged = w.agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    assert merged["included"] == [honest.ss58_address]
    assert merged["excluded"] == {big.ss58_address: "norm_outlier"}
    assert merged["new_model_sha256"] == _model_of(w, [honest.ss58_address])
    assert w.ledger.settled[("run-1", 0)] == {honest.ss58_address: TOKENS_PER_MICRO_BATCH}


def test_a_committed_update_never_uploaded_is_unpaid_not_burned(unaudited: World) -> None:
    """A blob the aggregator reports missing earns nothing, but the tape's word burns
    nothing either: a relay that lost it, or a lying aggregator, must not cost an island
    its escrow (a fault is proven by an audit verdict, which the island can dispute)."""
    w = unaudited
    for i, key in enumerate(KEYS[:3]):
        w.commit(key, w.update(i + 1))
    ghost = KEYS[3]
    w.commit(ghost, w.update(7), upload=False)
    _settle(w)
    merged = w.agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    assert merged["excluded"] == {ghost.ss58_address: "missing_blob"}
    assert ghost.ss58_address not in w.ledger.settled[("run-1", 0)]
    assert ("run-1", 0, ghost.ss58_address) not in w.ledger.faults
    assert len(w.ledger.settled[("run-1", 0)]) == 3


def test_candidates_keep_commit_order(unaudited: World) -> None:
    w = unaudited
    for i, key in enumerate(reversed(KEYS[:3])):
        w.commit(key, w.update(i + 1))
    detail = w.agg.service.round_detail("run-1", 0)
    assert detail.commit_order == [k.ss58_address for k in reversed(KEYS[:3])]
    from hypertrain.aggregator.collect import collect

    got = collect(detail, w.manifest, 0)
    seq = {c.hotkey: c.seq for c in got.candidates}
    assert [seq[k.ss58_address] for k in reversed(KEYS[:3])] == [0, 1, 2]
    assert all(isinstance(c, Candidate) for c in got.candidates)


def test_unaudited_noisy_copies_averages_and_reversed_updates_are_not_paid(
    unaudited: World,
) -> None:
    """Through the real service: derived copies and a reversed update in a round nobody
    audits are excluded, unpaid, and the model is the honest islands' merge."""
    w = unaudited
    honest, noisy, average, reverse = KEYS[:3], KEYS[3], KEYS[4], KEYS[5]
    for i, key in enumerate(honest):
        w.commit(key, w.update(i + 1))
    a, b = delta(w.manifest, 1), delta(w.manifest, 2)
    gen = torch.Generator().manual_seed(3)
    block = w.manifest.compression.block_size
    w.commit(noisy, encode_int8(
        {k: v + torch.randn(v.shape, generator=gen) * 0.2 * v.std() for k, v in a.items()}, block
    ))  # fmt: skip
    w.commit(average, encode_int8({k: (a[k] + b[k]) / 2 for k in a}, block))
    w.commit(reverse, encode_int8({k: -v for k, v in delta(w.manifest, 9).items()}, block))
    _settle(w)
    merged = w.agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    honest_keys = sorted(k.ss58_address for k in honest)
    assert sorted(merged["included"]) == honest_keys
    assert merged["excluded"] == {
        noisy.ss58_address: "near_duplicate",
        average.ss58_address: "near_duplicate",
        reverse.ss58_address: "against_aggregate",
    }
    assert w.ledger.settled[("run-1", 0)] == dict.fromkeys(honest_keys, TOKENS_PER_MICRO_BATCH)
    assert not any(key[2] in {noisy.ss58_address, average.ss58_address} for key in w.ledger.faults)
    assert merged["new_model_sha256"] == _model_of(w, honest_keys)
