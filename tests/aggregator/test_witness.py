"""A real witness against the real service and real blobs: honest tapes settle, forged
ones are contested and never paid.

The service requires one witness (``tape_witnesses = 1``). Three islands commit real
int8 updates, every assigned audit matches, and either the honest aggregator merges, or
a dishonest aggregator key posts the forged tape of
``tests/attacks_found/test_forged_merge_tape.py`` (the audit-proven honest island called
``near_duplicate``, only its colluder included), this time as a complete, published tape
whose signed record matches it. The witness (its own registered key) recomputes the
merge from the tape and the blobs with ``verify_tape`` and attests.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hypertrain.aggregator import chain
from hypertrain.aggregator.availability import updates_deadline
from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.collect import collect
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.tape import Excluded, Tape
from hypertrain.aggregator.witness import (
    Finding,
    Witness,
    inputs_difference,
    pending,
    witness_round,
)
from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RoundSummary
from hypertrain.challenge.app import create_app
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.codec import encode_int8
from tests.aggregator.helpers import delta
from tests.challenge.conftest import Harness
from tests.challenge.helpers import (
    AGGREGATOR,
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

AGG = AGGREGATOR  # the key the test service names (HYPERTRAIN_AGGREGATOR_HOTKEYS)
WITNESS = Hotkey.from_seed(b"\x71" * 32)
WORKER = {"Authorization": f"Bearer {TOKENS['worker']}"}


@pytest.fixture
def witnessed(tmp_path: Path, miner_keys: list[Hotkey]) -> Iterator[Harness]:
    """The service harness, with one witness required and the witness key registered."""
    registered = [k.ss58_address for k in [*miner_keys, WITNESS]]
    settings = make_settings(tmp_path, registered, tape_witnesses=1)
    beacon, ledger = SteppedBeacon(), FakeLedger()
    with TestClient(create_app(settings, beacon=beacon, ledger=ledger)) as client:
        r = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert r.status_code == 200, r.text
        auditor = Hotkey.from_seed(b"\x55" * 32)
        yield Harness(client, beacon, ledger, miner_keys, WITNESS, auditor, tmp_path)


def _client(h: Harness) -> ChallengeClient:
    return ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
        http=h.client,
    )  # fmt: skip


def _audited_round(h: Harness, agg: Aggregator, m: RunManifest, blobs: MemoryBlobs) -> None:
    """Round 0: three islands commit real updates, every assigned audit matches: merge."""
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    agg.step(m, open_rounds=True)
    for i, key in enumerate(h.miners[:3]):
        data = encode_int8(delta(m, i), m.compression.block_size)
        sha = blobs.put(data, kind="update", round=0)
        body = {"round": 0, "checkpoint_root": "cd" * 32, "leaf_count": m.round.num_segments + 1,
                "update_sha256": sha, "update_bytes": len(data), "tokens": TOKENS_PER_MICRO_BATCH,
                "update_url": f"memory:{sha}", "train_loss": 3.0}  # fmt: skip
        assert h.client.post("/v1/commit", json=signed(key, "commit", body)).status_code == 200
    h.tick(1)
    for a in agg.service.round_detail("run-1", 0).assignments:
        good = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", good),
                          headers=WORKER)  # fmt: skip
        assert r.status_code == 200, r.text
    h.tick(2)


def _forge(agg: Aggregator, m: RunManifest, blobs: MemoryBlobs, honest: str) -> MergeResult:
    """The honest merge with ``honest`` moved from included to ``near_duplicate``."""
    got = collect(agg.service.round_detail("run-1", 0), m, 0)
    inputs = MergeInputs(m, 0, got.start_model_sha256, None, got.candidates, got.excluded,
                         proven=got.proven, updates_by_round=_deadline(agg))  # fmt: skip
    real = merge(inputs, blobs)
    dropped = next(i for i in real.tape.included if i.hotkey == honest)
    tape = real.tape.model_copy(update={
        "included": [i for i in real.tape.included if i.hotkey != honest],
        "excluded": [*real.tape.excluded, Excluded(
            hotkey=honest, update_sha256=dropped.update_sha256, tokens=dropped.tokens,
            stage="screen", reason="near_duplicate", detail="a copy")],
    })  # fmt: skip
    return MergeResult(tape, real.model_blob, real.outer_blob, real.broadcast_blob)


def _deadline(agg: Aggregator) -> int | None:
    """Round 0's upload deadline, as the honest aggregator writes it into its tape."""
    return updates_deadline(agg.service.round_detail("run-1", 0))


def _witness(h: Harness, blobs: MemoryBlobs, events: list[dict[str, Any]]) -> Witness:
    return Witness(_client(h), blobs, WITNESS, "run-1", events.append)


def test_an_honest_merge_waits_for_the_witness_and_then_settles(
    witnessed: Harness, tmp_path: Path
) -> None:
    h, blobs, events = witnessed, MemoryBlobs(), []
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    assert agg.step(m, open_rounds=True) == 1
    h.tick(5)  # the dispute window is long closed: only the witness is missing
    assert ("run-1", 0) not in h.ledger.settled
    assert agg.service.round_detail("run-1", 0).phase == "settle"
    witness = _witness(h, blobs, events)
    assert witness.step(m) == 1
    assert [(e["agrees"], e["status"]) for e in events] == [(True, "witnessed")]
    assert witness.step(m) == 0  # one word per tape
    h.tick(1)
    detail = agg.service.round_detail("run-1", 0)
    assert detail.phase == "final" and detail.witnesses is not None
    assert detail.witnesses.agreeing == [WITNESS.ss58_address]
    assert set(h.ledger.settled[("run-1", 0)]) == {k.ss58_address for k in h.miners[:3]}


def test_a_forged_tape_is_caught_by_a_real_witness_and_never_paid(
    witnessed: Harness, tmp_path: Path
) -> None:
    h, blobs, events = witnessed, MemoryBlobs(), []
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    honest = h.miners[0].ss58_address
    forged = _forge(agg, m, blobs, honest)
    record = agg.publish(m, forged)  # the tape and its blobs are public, the record matches
    assert record.excluded == {honest: "near_duplicate"}
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    detail = agg.service.round_detail("run-1", 0)
    finding = witness_round(detail, m, None, blobs)
    assert finding is not None and not finding.agrees
    assert (finding.first_difference or "").startswith("tape.")  # the recomputation differs
    assert _witness(h, blobs, events).step(m) == 1
    h.tick(10)
    assert ("run-1", 0) not in h.ledger.settled  # the forger's colluders are paid nothing
    assert h.ledger.faults == []
    view = agg.service.round_detail("run-1", 0).witnesses
    assert view is not None and view.status == "contested"
    assert view.first_difference == finding.first_difference
    assert agg.service.round_detail("run-1", 0).phase == "settle"


def test_a_record_that_is_not_its_tape_is_caught(witnessed: Harness, tmp_path: Path) -> None:
    """The tape is the honest recomputation, but the signed record settlement reads
    leaves the honest island out: the witness compares the two."""
    h, blobs = witnessed, MemoryBlobs()
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    got = collect(agg.service.round_detail("run-1", 0), m, 0)
    real = merge(MergeInputs(m, 0, got.start_model_sha256, None, got.candidates, got.excluded,
                             proven=got.proven, updates_by_round=_deadline(agg)),
                 blobs)  # fmt: skip
    honest = h.miners[0].ss58_address
    record = agg.publish(m, real)
    lying = record.model_copy(update={
        "included": [k for k in record.included if k != honest],
        "excluded": {**record.excluded, honest: "near_duplicate"},
    })  # fmt: skip
    agg.service.post_merge(agg.seal("merge-tape", lying.model_dump(mode="json")))
    finding = witness_round(agg.service.round_detail("run-1", 0), m, None, blobs)
    assert finding is not None
    assert (finding.first_difference or "").startswith("record.included")


def _honest(agg: Aggregator, m: RunManifest, blobs: MemoryBlobs) -> MergeResult:
    got = collect(agg.service.round_detail("run-1", 0), m, 0)
    inputs = MergeInputs(m, 0, got.start_model_sha256, None, got.candidates, got.excluded,
                         proven=got.proven, updates_by_round=_deadline(agg))  # fmt: skip
    return merge(inputs, blobs)


def _first_candidate_as(tape: Tape, reason: str) -> dict[str, Any]:
    c = tape.candidates[0]
    moved = Excluded(hotkey=c.hotkey, update_sha256=c.update_sha256, tokens=c.tokens,
                     stage="collect", reason=reason)  # type: ignore[arg-type]  # fmt: skip
    return {"candidates": list(tape.candidates[1:]), "excluded": [*tape.excluded, moved],
            "included": [i for i in tape.included if i.hotkey != c.hotkey]}  # fmt: skip


# a change to the honest tape -> the start of the witness's first difference
TAPE_LIES: list[tuple[str, Any, str]] = [
    ("the previous outer state", lambda t, m: {"prev_outer_state_sha256": "ab" * 32},
     "tape.prev_outer_state_sha256"),
    ("another manifest", lambda t, m: {
        "manifest": (other := m.model_copy(update={"seed": m.seed + 1})),
        "manifest_digest": other.digest()}, "tape.manifest_digest"),
    ("a candidate's tokens", lambda t, m: {"candidates": [
        t.candidates[0].model_copy(update={"tokens": t.candidates[0].tokens - 1}),
        *t.candidates[1:]]}, "tape.candidates["),
    ("a matched island called audit_mismatch",
     lambda t, m: _first_candidate_as(t, "audit_mismatch"),
     "tape.excluded["),
    ("a good commit called bad_commit", lambda t, m: _first_candidate_as(t, "bad_commit"),
     "tape.excluded["),
    ("a commit of this round called wrong_round",
     lambda t, m: _first_candidate_as(t, "wrong_round"), "tape.excluded["),
    ("an island never merged before called stale_update",
     lambda t, m: _first_candidate_as(t, "stale_update"), "tape.excluded["),
    ("an island with one commit called duplicate",
     lambda t, m: _first_candidate_as(t, "duplicate"), "tape.excluded["),
    ("a committed island left out of the tape", lambda t, m: {"candidates": t.candidates[1:]},
     "tape.candidates:"),
    ("a matched island called rolled_back without a fault",
     lambda t, m: _first_candidate_as(t, "rolled_back"), "tape.excluded["),
    ("a matched island called near_duplicate at the collect stage",
     lambda t, m: _first_candidate_as(t, "near_duplicate"), "tape.excluded[0].reason: 'near"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "change", "where"), TAPE_LIES, ids=[c[0] for c in TAPE_LIES])
def test_the_witness_checks_the_tapes_inputs_against_the_public_record(
    witnessed: Harness, tmp_path: Path, case: str, change: Any, where: str
) -> None:
    h, blobs = witnessed, MemoryBlobs()
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    real = _honest(agg, m, blobs)
    lie = real.tape.model_copy(update=change(real.tape, m))
    record = agg.publish(m, MergeResult(lie, real.model_blob, real.outer_blob))
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    finding = witness_round(agg.service.round_detail("run-1", 0), m, None, blobs)
    assert finding is not None and (finding.first_difference or "").startswith(where), (
        case, finding
    )  # fmt: skip


def test_unpublished_blobs_are_a_disagreement(witnessed: Harness, tmp_path: Path) -> None:
    """A tape or model nobody can fetch cannot be recomputed or trained on: it disagrees."""
    h, blobs = witnessed, MemoryBlobs()
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    record = agg.publish(m, _honest(agg, m, blobs))
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    detail = agg.service.round_detail("run-1", 0)
    model = blobs.data.pop(record.new_model_sha256)
    finding = witness_round(detail, m, None, blobs)
    assert finding is not None and (finding.first_difference or "").startswith("model: ")
    blobs.data[record.new_model_sha256] = model
    tape = blobs.data.pop(record.tape_sha256)
    finding = witness_round(detail, m, None, blobs)
    assert finding is not None and (finding.first_difference or "").startswith("tape: ")
    blobs.data[record.tape_sha256] = tape
    assert witness_round(detail, m, None, blobs) == Finding(0, record.tape_sha256, None)


class _Counting(ChallengeClient):
    """The real client, counting the round details it reads."""

    read: list[int]

    def round_detail(self, run_id: str, index: int) -> Any:
        self.read.append(index)
        return super().round_detail(run_id, index)


def test_the_next_round_waits_for_the_witness_and_the_witness_reads_only_new_tapes(
    witnessed: Harness, tmp_path: Path
) -> None:
    """Round 1 opens on round 0's model only once a real witness agreed with its tape;
    after that the witness reads no round detail for a tape it already attested."""
    h, blobs, events = witnessed, MemoryBlobs(), []
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg", events.append)
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    assert agg.step(m, open_rounds=True) == 1
    assert [r.round for r in agg.service.rounds("run-1")] == [0]  # not opened on it yet
    assert events[-1] == {"event": "waiting", "round": 1, "for": "witnesses"}
    client = _Counting("http://testserver", http=h.client)
    client.read = []
    witness = Witness(client, blobs, WITNESS, "run-1")
    assert witness.step(m) == 1
    agg.step(m, open_rounds=True)
    rounds = agg.service.rounds("run-1")
    assert [r.round for r in rounds] == [0, 1]
    assert rounds[1].start_model_sha256 == rounds[0].new_model_sha256
    detail_of = partial(agg.service.round_detail, "run-1")
    record = detail_of(0).current_merge()
    assert record is not None and chain.previous_outer(detail_of, 1, m) == record.outer_state_sha256
    shas = {e.body["update_sha256"] for e in detail_of(0).commits if e.signer in record.included}
    assert chain.merged_updates(detail_of, 1, m) == shas and len(shas) == 3
    memo: chain.MergedMemo = {}  # the witness verifies a round's set once per set of tapes
    assert chain.merged_updates(detail_of, 1, m, memo) == shas and memo == {(0, True, 0): shas}
    memo[(0, True, 0)] = frozenset({"kept"})
    assert chain.merged_updates(detail_of, 1, m, memo) == {"kept"}  # read from the memo
    client.read.clear()
    assert witness.step(m) == 0 and client.read == []  # nothing new to read


@pytest.mark.parametrize("reason", ["stale_update", "duplicate"])
def test_a_stale_or_duplicate_exclusion_stands_only_on_the_public_record(
    witnessed: Harness, tmp_path: Path, reason: str
) -> None:
    """``stale_update`` holds where an earlier round's tape included the island's signed
    update, ``duplicate`` where it has a second commit; otherwise it is a lie."""
    h, blobs = witnessed, MemoryBlobs()
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    real = _honest(agg, m, blobs)
    tape = real.tape.model_copy(update=_first_candidate_as(real.tape, reason))
    detail = agg.service.round_detail("run-1", 0)
    merged = frozenset({real.tape.candidates[0].update_sha256})
    lie = inputs_difference(tape, detail, m, None, frozenset())
    assert lie is not None and reason in lie
    found = inputs_difference(tape, detail, m, None, merged)
    if reason == "stale_update":
        assert found is None  # an update merged before is stale: the record supports it
    else:
        assert found is not None and "one commit" in found  # merged says nothing of copies


def _summary(index: int, phase: str, tape: str | None) -> RoundSummary:
    zero = {"match": 0, "mismatch": 0}
    return RoundSummary.model_validate({
        "round": index, "phase": phase, "open_beacon_round": 1, "commit_deadline_round": 2,
        "selection_beacon_round": None, "audit_close_round": None,
        "dispute_deadline_round": None, "start_model_sha256": None, "new_model_sha256": None,
        "tape_sha256": tape, "commits": 0, "tokens": 0, "update_bytes": 0, "train_loss": None,
        "eval_loss": None, "audits": 0, "verdicts": zero, "disputes": 0, "settled_epoch": None,
    })  # fmt: skip


def test_a_witness_with_a_backlog_attests_the_chains_head_first() -> None:
    """An outsider's finding: a witness that fell behind worked through its backlog
    oldest first, so every round's merge was cleared only after the next round had
    opened without it, and the chain froze. The newest tape is attested first, one per
    step; rounds without a tape, and tapes already attested, are not listed."""
    rounds = [
        _summary(0, "final", "a0"),
        _summary(1, "settle", "a1"),
        _summary(2, "settle", "a2"),
        _summary(3, "merge", None),
        _summary(4, "train", None),
    ]
    assert [r.round for r in pending(rounds, set())] == [2, 1, 0]
    assert [r.round for r in pending(rounds, {(2, "a2"), (0, "a0")})] == [1]
    assert [r.round for r in pending(rounds, {(1, "old")})] == [2, 1, 0]  # a correction
