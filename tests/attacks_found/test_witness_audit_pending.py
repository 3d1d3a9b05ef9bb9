"""A tape that calls an audit-proven island ``audit_pending`` is cleared by the witness,
and the island is not paid for a round its audit proved.

docs/mechanism.md, Tape witnesses: the witness checks "``audit_pending`` only with an
assigned audit" — not that the assigned audit is still without a verdict when the tape
was made. The settlement table pays an ``audit_pending`` exclusion only as "held ... an
assigned audit has no verdict yet" (a late ``match`` releases it); an island whose
``match`` verdict was in before the merge is neither. Real service with one witness
required, real blobs, the real merge on the forged inputs, the real witness.

Safe outcome: either the witness disagrees (the audit had its ``match`` before the
tape) or the island is paid for the round once it settles. Observed (defence holds on
pay): the witness agrees and the round is witnessed, but settlement pays the island its
full share; only its update is left out of the model (the aggregator may leave out any
audited update it likes, which costs that island nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.merge import MergeInputs, merge
from hypertrain.aggregator.runner import Aggregator
from tests.aggregator.test_witness import (
    AGG,
    _audited_round,
    _client,
    _first_candidate_as,
    _honest,
    _witness,
    witnessed,
)
from tests.challenge.conftest import Harness, miner_keys

__all__ = ["miner_keys", "witnessed"]


def test_an_audit_proven_island_called_pending_is_paid_or_contested(
    witnessed: Harness, tmp_path: Path
) -> None:
    h, blobs, events = witnessed, MemoryBlobs(), []
    agg = Aggregator(_client(h), blobs, AGG, "run-1", tmp_path / "agg")
    m = agg.service.manifest("run-1")
    _audited_round(h, agg, m, blobs)  # every assigned audit has its `match` before the merge
    real = _honest(agg, m, blobs)
    dropped = real.tape.candidates[0].hotkey
    assigned = {a.body["hotkey"] for a in agg.service.round_detail("run-1", 0).assignments}
    assert dropped in assigned
    lie = real.tape.model_copy(update=_first_candidate_as(real.tape, "audit_pending"))
    forged = merge(
        MergeInputs(m, 0, lie.start_model_sha256, None, list(lie.candidates),
                    list(lie.excluded), proven=[c.hotkey for c in lie.candidates],
                    updates_by_round=lie.updates_by_round),
        blobs,
    )  # fmt: skip
    record = agg.publish(m, forged)
    assert record.excluded == {dropped: "audit_pending"}
    agg.service.post_merge(agg.seal("merge-tape", record.model_dump(mode="json")))
    witness = _witness(h, blobs, events)
    assert witness.step(m) == 1
    h.tick(10)
    attested: list[dict[str, Any]] = events
    status = agg.service.round_detail("run-1", 0).witnesses
    assert status is not None
    paid = h.ledger.settled.get(("run-1", 0), {})
    assert status.status == "contested" or dropped in paid, (attested, paid)
