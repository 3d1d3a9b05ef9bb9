"""A rollback of a round that opened past the witness wait (against the real service).

Where witnesses are required and a round's tape is not witnessed in time, the next
round opens on that round's own start model: its merge is left out of the chain
(docs/mechanism.md, "Tape witnesses"). A fault later proven in the next round was rolled
back by a correction that starts, as the round did, from the left-out round's start
model, which the service refused (409 ``broken_chain``: it took only the latest merged
round's model as a predecessor), at every try: the fault stayed due, and the devnet
waited for it until its timeout. The chain the service checks and the chain the
aggregator and the witness follow (``aggregator.chain.previous_outer``) are one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.witness import Witness
from tests.aggregator.conftest import WITNESS_WAIT
from tests.aggregator.service_chain import aggregator_for, client_for, prove, train
from tests.challenge.conftest import Harness
from tests.challenge.helpers import join_body, signed

WAIT = WITNESS_WAIT


def _left_out_round_0(h: Harness, tmp: Path) -> tuple[Aggregator, MemoryBlobs, list[Any]]:
    """Round 0 merged, never witnessed in time: round 1 opens on round 0's start model."""
    blobs, events = MemoryBlobs(), list[Any]()
    agg = aggregator_for(h, tmp, blobs, events, client_for(h))
    m = agg.service.manifest("run-1")
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    agg.step(m, open_rounds=True)
    train(h, agg, m, blobs, 0)
    assert events[-1] == {"event": "waiting", "round": 1, "for": "witnesses"}
    h.tick(WAIT)
    agg.step(m, open_rounds=True)
    rounds = agg.service.rounds("run-1")
    assert rounds[1].start_model_sha256 == rounds[0].start_model_sha256  # left out
    return agg, blobs, events


def test_a_fault_after_a_left_out_merge_is_rolled_back(
    witness_harness: Harness, tmp_path: Path
) -> None:
    h = witness_harness
    agg, blobs, events = _left_out_round_0(h, tmp_path)
    m = agg.service.manifest("run-1")
    train(h, agg, m, blobs, 1)
    seen: list[Any] = []
    witness = Witness(client_for(h), blobs, h.outsider, "run-1", seen.append)
    while witness.step(m):
        pass
    h.tick(1)  # witnessed: rounds 0 and 1 settle
    assert [r.phase for r in agg.service.rounds("run-1")][:2] == ["final", "final"]
    prove(h, 1, h.miners[1].ss58_address)
    agg.step(m, open_rounds=False)  # the correction, witnessed before round 2 opens
    assert not [e for e in events if e["event"] == "correction_refused"]
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [[1]]
    assert not any(f.rollback_due for f in agg.service.proven_faults("run-1"))
    seen.clear()
    assert witness.step(m) == 1
    assert [(e["round"], e["agrees"]) for e in seen if e["event"] == "attested"] == [(1, True)]
    agg.step(m, open_rounds=True)  # round 2 opens on the witnessed correction's model
    corrected = agg.service.round_detail("run-1", 1).current_merge()
    assert corrected is not None  # round 0's merge stays out of the chain:
    assert corrected.start_model_sha256 == agg.service.rounds("run-1")[0].start_model_sha256
    assert agg.service.rounds("run-1")[2].start_model_sha256 == corrected.new_model_sha256
