"""The aggregator key relabels an audit-proven honest island and it still gets paid.

Outsider's finding (issue 40): with tape witnesses off by default, settlement paid on
the aggregator's tape as soon as it was posted. The project's own aggregator with one
change, an honest island relabelled ``near_duplicate``, left that island (audit verdict
``match``) with nothing while the others were paid; the witness view said
``not_required``, and an exclusion cannot be disputed. Given at the collect stage,
where a recomputation takes exclusions as inputs, the label also got past a witness.

Setup: the service built from the environment as an operator configures it (its
defaults, the aggregator and witness keys named, a local metagraph file), the real
:class:`~hypertrain.aggregator.runner.Aggregator` subclassed with that one change, a
real witness under its own key, three islands with real int8 updates, every assigned
audit ``match``. Now witnesses are on by default, the witness contests the relabelled
tape (a screen's code at the collect stage is a difference of ``verify_tape``), nobody
is paid on it, and the round settles on the honest correction, the victim included.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hypertrain.aggregator.availability import updates_deadline
from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.collect import collect
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.tape import Excluded
from hypertrain.aggregator.witness import Witness
from hypertrain.api.client import ChallengeClient
from hypertrain.challenge.app import create_app
from hypertrain.challenge.settings import settings_from_env
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import MergeCorrection
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
    manifest_doc,
    signed,
    write_metagraph,
    write_secrets,
)

ISLANDS = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(3)]
WITNESS = Hotkey.from_seed(b"\x71" * 32)
WORKER = {"Authorization": f"Bearer {TOKENS['worker']}"}
RUN = "run-1"


@dataclass
class Relabelling(Aggregator):
    """The project's aggregator with one change: ``victim`` moves from the merge's
    candidates to its collect-stage exclusions as ``near_duplicate`` before the merge,
    so the tape, its signed record and the published model all agree with each other."""

    victim: str = ""

    def merge_round(self, manifest: RunManifest, index: int) -> MergeResult:
        detail = self.service.round_detail(self.run_id, index)
        got = collect(detail, manifest, index, self.stale())
        (mine,) = [c for c in got.candidates if c.hotkey == self.victim]
        label = Excluded(hotkey=mine.hotkey, update_sha256=mine.update_sha256,
                         tokens=mine.tokens, stage="collect", reason="near_duplicate",
                         detail="explained by earlier updates")  # fmt: skip
        inputs = MergeInputs(
            manifest, index, got.start_model_sha256, self.previous_outer(manifest, index),
            [c for c in got.candidates if c is not mine], [*got.excluded, label],
            proven=[h for h in got.proven if h != self.victim],
            updates_by_round=updates_deadline(detail),
        )  # fmt: skip
        result = merge(inputs, self.store)
        record = self.publish(manifest, result)
        self.service.post_merge(self.seal("merge-tape", record.model_dump(mode="json")))
        self._remember(result)
        return result


@pytest.fixture
def operated(tmp_path: Path) -> Iterator[Harness]:
    """The service from an operator's environment: witness settings left at their defaults."""
    files = write_secrets(tmp_path / "secrets")
    metagraph = write_metagraph(
        tmp_path / "metagraph.json", [k.ss58_address for k in [*ISLANDS, WITNESS]]
    )
    env = {
        "CHALLENGE_STATE_DIR": str(tmp_path / "state"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(files["internal"]),
        "CHALLENGE_ADMIN_TOKEN_FILE": str(files["admin"]),
        "CHALLENGE_WORKER_TOKEN_FILE": str(files["worker"]),
        "HYPERTRAIN_COORD_KEY_FILE": str(files["coord"]),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(metagraph),
        "HYPERTRAIN_METAGRAPH_REFRESH_S": "0.2",
        "HYPERTRAIN_BEACON_POLL_S": "0.05",
        "HYPERTRAIN_AGGREGATOR_HOTKEYS": AGGREGATOR.ss58_address,
        "HYPERTRAIN_WITNESS_HOTKEYS": WITNESS.ss58_address,
    }
    beacon, ledger = SteppedBeacon(), FakeLedger()
    app = create_app(settings_from_env(env), beacon=beacon, ledger=ledger)
    with TestClient(app) as client:
        r = client.post(
            "/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
        )
        assert r.status_code == 200, r.text
        auditor = Hotkey.from_seed(b"\x55" * 32)
        yield Harness(client, beacon, ledger, ISLANDS, WITNESS, auditor, tmp_path)


def _client(h: Harness) -> ChallengeClient:
    return ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], admin_token=TOKENS["admin"],
        http=h.client,
    )  # fmt: skip


def _audited_round(h: Harness, agg: Aggregator, m: RunManifest, blobs: MemoryBlobs) -> None:
    """Round 0: three islands commit real updates and every assigned audit matches."""
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
    for a in agg.service.round_detail(RUN, 0).assignments:
        good = {"round": 0, "hotkey": a.body["hotkey"], "segments": a.body["segments"],
                "result": "match", "update_checked": True}  # fmt: skip
        r = h.client.post("/worker/v1/verdict", json=signed(h.auditor, "verdict", good),
                          headers=WORKER)  # fmt: skip
        assert r.status_code == 200, r.text
    h.tick(2)


def _correct(h: Harness, m: RunManifest, blobs: MemoryBlobs, forged: str) -> None:
    """The honest merge of round 0, posted as a correction of the contested tape."""
    honest = Aggregator(_client(h), blobs, AGGREGATOR, RUN, h.tmp / "honest")
    detail = honest.service.round_detail(RUN, 0)
    got = collect(detail, m, 0)
    inputs = MergeInputs(m, 0, got.start_model_sha256, None, got.candidates, got.excluded,
                         proven=got.proven, updates_by_round=updates_deadline(detail))  # fmt: skip
    body = MergeCorrection(supersedes_tape_sha256=forged, faults=[],
                           tape=honest.publish(m, merge(inputs, blobs)))  # fmt: skip
    honest.service.post_correction(honest.seal("merge-correction", body.model_dump(mode="json")))


def test_a_relabelled_honest_island_is_contested_and_paid(operated: Harness) -> None:
    h, blobs = operated, MemoryBlobs()
    events: list[dict[str, Any]] = []
    victim = h.miners[0].ss58_address
    agg = Relabelling(_client(h), blobs, AGGREGATOR, RUN, h.tmp / "agg", victim=victim)
    m = agg.service.manifest(RUN)
    _audited_round(h, agg, m, blobs)
    assert agg.step(m, open_rounds=False) == 1
    record = agg.service.round_detail(RUN, 0).current_merge()
    assert record is not None and record.excluded == {victim: "near_duplicate"}
    h.tick(10)  # the dispute window is long over: on the aggregator's word it would pay now
    assert (RUN, 0) not in h.ledger.settled, "paid on the aggregator's word alone"

    witness = Witness(_client(h), blobs, WITNESS, RUN, emit=events.append)
    assert witness.step(m) == 1
    view = agg.service.round_detail(RUN, 0).witnesses
    assert view is not None and view.status == "contested"
    assert "'near_duplicate' at the collect stage" in (view.first_difference or "")
    h.tick(10)
    assert (RUN, 0) not in h.ledger.settled and h.ledger.faults == []  # nobody paid on it

    _correct(h, m, blobs, record.tape_sha256)
    assert witness.step(m) == 1
    assert [(e["agrees"], e["status"]) for e in events] == [
        (False, "contested"), (True, "witnessed")
    ]  # fmt: skip
    h.tick(1)
    detail = agg.service.round_detail(RUN, 0)
    assert detail.phase == "final"
    assert set(h.ledger.settled[(RUN, 0)]) == {k.ss58_address for k in h.miners[:3]}
