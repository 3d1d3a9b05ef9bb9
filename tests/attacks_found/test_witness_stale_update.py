"""A tape that calls an audit-proven island's fresh update ``stale_update`` (or
``duplicate``) is cleared by the witness: the island is unpaid on a witnessed tape.

docs/mechanism.md, Tape witnesses: the witnesses exist because "a tape that leaves
audit-proven islands out ... would settle on the aggregator key's word"; the witness
checks "every signed commit offered as a candidate or excluded at collection with its
own update hash and tokens". docs/threats.md lists as residual that "`stale_update` and
`duplicate` collect exclusions are taken from the tape as given" — but both are facts of
the public record (an update hash merged in an earlier round's tape; two commits of one
update hash), so the forged tape of tests/attacks_found/test_forged_merge_tape.py only
has to swap its reason from ``near_duplicate`` to ``stale_update`` to pass. Real
service, real blobs, real merge, real witness.

Safe outcome: the witness disagrees (the update was never merged before, nobody else
committed it) and the round is not paid on that tape.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.witness import witness_round
from tests.aggregator.test_witness import (
    AGG,
    _audited_round,
    _client,
    _first_candidate_as,
    _honest,
    witnessed,
)
from tests.challenge.conftest import Harness, miner_keys

__all__ = ["miner_keys", "witnessed"]


@pytest.mark.parametrize("reason", ["stale_update", "duplicate"])
def test_a_fresh_update_called_stale_is_a_disagreement(
    witnessed: Harness, tmp_path: Path, reason: str
) -> None:
    h, blobs = witnessed, MemoryBlobs()
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)  # round 0: every island audited `match`
    real = _honest(agg, m, blobs)
    lie = real.tape.model_copy(update=_first_candidate_as(real.tape, reason))
    dropped = real.tape.candidates[0].hotkey
    # a complete, published forgery: the merge recomputed on the forged inputs
    forged = merge(
        MergeInputs(m, 0, lie.start_model_sha256, None, list(lie.candidates),
                    list(lie.excluded), proven=[c.hotkey for c in lie.candidates],
                    updates_by_round=lie.updates_by_round),
        blobs,
    )  # fmt: skip
    result = MergeResult(forged.tape, forged.model_blob, forged.outer_blob, forged.broadcast_blob)
    record = agg.publish(m, result)
    assert record.excluded == {dropped: reason}
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    finding = witness_round(agg.service.round_detail("run-1", 0), m, None, blobs)
    assert finding is not None
    assert not finding.agrees, f"{dropped[:8]} called {reason} on a witnessed tape"
