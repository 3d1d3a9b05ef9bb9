"""A contested (forged) tape's model is the start of the next round, and the witnesses
clear that next round: it is paid, and the forged model stays in the chain.

docs/mechanism.md, "Tape witnesses": without witnesses "a tape that leaves audit-proven
islands out, or names a model of the aggregator's choosing, would settle on the
aggregator key's word"; a contested tape is "never paid on that tape". The next round
"may still open on its model" (threats.md: "a later correction moves them"), but no
correction exists for a forged tape without a proven fault. Played on the real service,
real blobs, the real aggregator merge and the real witness: round 0 is forged (the
audit-proven honest island moved to ``near_duplicate``), the witness contests it, round
1 opens on the forged model, every island commits and is audited ``match``, the honest
aggregator merges round 1 on top of the forged model and the same honest witness
attests round 1.

Fixed: where witnesses are required the next round opens on a model only once its tape
is witnessed, and past the witness wait on the contested round's own start model
(docs/mechanism.md, "Tape witnesses"), so no round is built on the forged model.

Safe outcome: a round whose start model (and previous outer state) comes from a tape
that is not cleared cannot itself be cleared and paid; otherwise the aggregator's
forged model becomes the base of every later paid round and the witnesses only ever
withhold one round's pool.
"""

from __future__ import annotations

from pathlib import Path

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.runner import Aggregator
from tests.aggregator.test_witness import (
    AGG,
    _audited_round,
    _client,
    _forge,
    _witness,
    witnessed,
)
from tests.challenge.conftest import Harness, miner_keys

__all__ = ["miner_keys", "witnessed"]


def test_a_round_built_on_a_contested_tapes_model_is_not_cleared(
    witnessed: Harness, tmp_path: Path
) -> None:
    h, blobs, events = witnessed, MemoryBlobs(), []
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)
    forged = _forge(agg, m, blobs, h.miners[0].ss58_address)
    record = agg.publish(m, forged)
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    witness = _witness(h, blobs, events)
    assert witness.step(m) == 1
    h.tick(10)
    r0 = agg.service.round_detail("run-1", 0)
    assert r0.witnesses is not None and r0.witnesses.status == "contested"
    assert agg.step(m, open_rounds=True) == 0
    # the safe outcome, reached earlier: no round opens on the contested tape's model ...
    assert [r.round for r in agg.service.rounds("run-1")] == [0]
    h.tick(30)  # ... and past the witness wait round 1 opens on round 0's own start model
    agg.step(m, open_rounds=True)
    opened = agg.service.round_detail("run-1", 1).open
    start = agg.service.round_detail("run-1", 0).open.body["start_model_sha256"]
    assert opened.body["start_model_sha256"] == start != record.new_model_sha256
    assert ("run-1", 0) not in h.ledger.settled
