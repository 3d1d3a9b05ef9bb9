"""Round trip against the real challenge service: genesis, collect, merge, settle, next round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.collect import collect
from hypertrain.aggregator.heldout import heldout_loss
from hypertrain.aggregator.runner import Aggregator, follow
from hypertrain.aggregator.tape import decode_tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.challenge.rule import PENDING_AUDIT
from hypertrain.evidence.errors import VerificationError
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.codec import encode_int8
from tests.aggregator.helpers import delta
from tests.challenge.conftest import Harness
from tests.challenge.helpers import AGGREGATOR, TOKENS, TOKENS_PER_MICRO_BATCH, join_body, signed

AGG = AGGREGATOR  # the key the test service names (HYPERTRAIN_AGGREGATOR_HOTKEYS)


def _aggregator(
    h: Harness, tmp: Path, blobs: MemoryBlobs, events: list[dict[str, Any]] | None = None
) -> Aggregator:
    service = ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
        http=h.client,
    )  # fmt: skip
    sink = events if events is not None else []
    return Aggregator(service, blobs, AGG, "run-1", tmp / "agg", sink.append)


def _commit(h: Harness, key: Hotkey, m: RunManifest, blobs: MemoryBlobs, seed: int) -> str:
    data = encode_int8(delta(m, seed), m.compression.block_size)
    sha = blobs.put(data, kind="update", round=0)
    body = {
        "round": 0, "checkpoint_root": "cd" * 32, "leaf_count": m.round.num_segments + 1,
        "update_sha256": sha, "update_bytes": len(data), "tokens": TOKENS_PER_MICRO_BATCH,
        "update_url": f"memory:{sha}", "train_loss": 3.0,
    }  # fmt: skip
    r = h.client.post("/v1/commit", json=signed(key, "commit", body))
    assert r.status_code == 200, r.text
    return sha


def test_genesis_merge_settle_and_next_round(harness: Harness, tmp_path: Path) -> None:
    h, blobs, events = harness, MemoryBlobs(), []
    agg = _aggregator(h, tmp_path, blobs, events)
    manifest = agg.service.manifest("run-1")
    gen = torch.Generator().manual_seed(0)
    agg.heldout = torch.randint(0, manifest.model.vocab_size, (2, 9), generator=gen)
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    assert agg.step(manifest, open_rounds=True) == 0  # opens round 0 with the genesis model
    detail = agg.service.round_detail("run-1", 0)
    assert detail.open.body["start_model_sha256"] in blobs.data
    for i, key in enumerate(h.miners[:3]):
        _commit(h, key, manifest, blobs, seed=i)
    h.tick(1)  # every island committed: the next beacon round selects the audits
    assigned = agg.service.round_detail("run-1", 0).assignments
    bad = assigned[0].body
    verdict = {"round": 0, "hotkey": bad["hotkey"], "segments": bad["segments"],
               "result": "mismatch", "first_bad_leaf": 1}  # fmt: skip
    r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", verdict),
                      headers={"Authorization": f"Bearer {TOKENS['worker']}"})  # fmt: skip
    assert r.status_code == 200, r.text
    for a in assigned[1:]:  # the others are proven: their norms set the reference
        good = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", good),
                          headers={"Authorization": f"Bearer {TOKENS['worker']}"})  # fmt: skip
        assert r.status_code == 200, r.text
    h.tick(2)
    assert agg.step(manifest, open_rounds=True) == 1
    rounds = agg.service.rounds("run-1")
    assert [r.phase for r in rounds] == ["settle", "train"]  # settles after disputes close
    h.tick(3)
    assert [r.phase for r in agg.service.rounds("run-1")] == ["final", "train"]
    merged = agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    tape_sha = merged["tape_sha256"]
    tape = decode_tape(blobs.get(tape_sha))
    assert {e.hotkey: e.reason for e in tape.excluded} == {bad["hotkey"]: "audit_mismatch"}
    assert len(tape.included) == 2 and tape.new_model_sha256 == merged["new_model_sha256"]
    new_model = decode_model_blob(blobs.get(tape.new_model_sha256), manifest.model)
    assert merged["eval_loss"] == heldout_loss(new_model, manifest, agg.heldout) > 0
    paid = {i.hotkey: TOKENS_PER_MICRO_BATCH for i in tape.included}
    assert h.ledger.settled[("run-1", 0)] == paid
    assert agg.service.round_detail("run-1", 1).open.body["start_model_sha256"] == (
        tape.new_model_sha256
    )
    assert verify_tape(tape, blobs).identical
    assert (tmp_path / "agg" / "tapes" / "000000.json").read_bytes() == tape.to_bytes()
    assert [e["event"] for e in events[-2:]] == ["merged", "opened"]
    # the merged updates are remembered: re-committing one later is a stale update
    assert agg.stale() == {i.update_sha256 for i in tape.included}


def test_no_round_is_opened_after_the_last_one(harness: Harness, tmp_path: Path) -> None:
    h, blobs = harness, MemoryBlobs()
    agg = _aggregator(h, tmp_path, blobs)
    agg.last_round = 0
    manifest = agg.service.manifest("run-1")
    for key in h.miners[:2]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    agg.step(manifest, open_rounds=True)
    for i, key in enumerate(h.miners[:2]):
        _commit(h, key, manifest, blobs, seed=i)
    h.tick(4)  # commit deadline passed: audits selected
    h.tick(10)  # audit window closed without verdicts: the round waits for its merge
    assert agg.step(manifest, open_rounds=True) == 1
    assert [r.phase for r in agg.service.rounds("run-1")] == ["settle"]
    h.tick(3)
    assert [r.phase for r in agg.service.rounds("run-1")] == ["final"]
    # assigned audits without a verdict: neither update is merged, and each reward is
    # held until a verdict exists (never paid on silence)
    settled = h.ledger.settled[("run-1", 0)]
    assert set(settled) == {k.ss58_address for k in h.miners[:2]}
    assert set(h.ledger.held[("run-1", 0)].values()) == {PENDING_AUDIT}


def test_collect_screens_commits(harness: Harness, tmp_path: Path) -> None:
    h, blobs = harness, MemoryBlobs()
    agg = _aggregator(h, tmp_path, blobs)
    manifest = agg.service.manifest("run-1")
    for key in h.miners[:2]:
        h.client.post("/v1/join", json=signed(key, "join", join_body()))
    agg.step(manifest, open_rounds=True)
    shas = [_commit(h, key, manifest, blobs, seed=i) for i, key in enumerate(h.miners[:2])]
    detail = agg.service.round_detail("run-1", 0)
    forged = detail.commits[0].model_copy(update={"signature": "00" * 64})
    other = signed(h.miners[2], "commit", {**detail.commits[1].body, "round": 5})
    lies = [forged, detail.commits[1], Envelope.model_validate(other)]
    doc = detail.model_copy(update={"commits": lies})
    got = collect(doc, manifest, 0, stale=frozenset({shas[1]}))
    assert got.candidates == []
    reasons = sorted(e.reason for e in got.excluded)
    assert reasons == ["bad_commit", "stale_update", "wrong_round"]
    clean = collect(detail, manifest, 0)
    assert sorted(c.update_sha256 for c in clean.candidates) == sorted(shas)
    assert all(c.update_bytes == len(blobs.get(c.update_sha256)) for c in clean.candidates)
    with pytest.raises(VerificationError, match="round-open"):
        forged_open = detail.open.model_copy(update={"signature": "00" * 64})
        collect(detail.model_copy(update={"open": forged_open}), manifest, 0)
    with pytest.raises(VerificationError, match="not 1"):
        collect(detail, manifest, 1)


def test_service_errors_are_typed(harness: Harness, tmp_path: Path) -> None:
    agg = _aggregator(harness, tmp_path, MemoryBlobs())
    with pytest.raises(ServiceError, match="404"):
        agg.service.round_detail("run-1", 7)
    bare = ChallengeClient("http://testserver", http=harness.client)
    with pytest.raises(ServiceError, match="worker token"):
        bare.post_merge(signed(AGG, "merge-tape", {}))  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="admin token"):
        bare.open_round("run-1", None, None)


def test_follow_opens_round_zero_and_survives_errors(harness: Harness, tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    agg = _aggregator(harness, tmp_path, MemoryBlobs(), events)
    polls: list[int] = []

    def stop() -> bool:
        polls.append(1)
        return len(polls) > 2

    assert follow(agg, open_rounds=True, poll_s=0, stop=stop) == 0
    assert [r.phase for r in agg.service.rounds("run-1")] == ["train"]
    assert events[0]["event"] == "opened"
    agg.step = lambda *a, **k: (_ for _ in ()).throw(ServiceError("down"))  # type: ignore[method-assign]
    agg.run_id = "run-1"
    polls.clear()
    assert follow(agg, open_rounds=True, poll_s=0, stop=stop) == 0
    assert events[-1] == {"event": "error", "detail": "down"}
