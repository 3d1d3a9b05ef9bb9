"""Automatic rollback against the real service: a fault proven after the merge is rebased
out of every later round, the islands move to the corrected model, and the service
refuses corrections that are not the next link of a proven rollback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypertrain.aggregator.rebase import check_correction, rebase
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.verify import verify_tape
from hypertrain.api.errors import ServiceError
from hypertrain.protocol.messages import FaultRef, MergeCorrection
from tests.aggregator.service_chain import (
    AGG,
    WORKER,
    Merged,
    current_tape,
    prove,
    train,
    two_merged_rounds,
)
from tests.challenge.conftest import Harness
from tests.challenge.helpers import signed


@pytest.fixture
def merged(harness: Harness, tmp_path: Path) -> Merged:
    """Two merged rounds (0, 1) with every island included; round 2 is open."""
    return two_merged_rounds(harness, tmp_path)


def test_a_late_fault_is_rebased_out_and_the_next_round_opens_on_it(
    merged: Merged,
) -> None:
    h, agg, blobs, events = merged
    m = agg.service.manifest("run-1")
    faulty = h.miners[1].ss58_address
    before = [current_tape(agg, blobs, 0), current_tape(agg, blobs, 1)]
    assert all(faulty in {i.hotkey for i in t.included} for t in before)
    prove(h, 0, faulty)
    [fault] = agg.service.proven_faults("run-1")
    assert (fault.round, fault.hotkey, fault.merged, fault.rollback_due) == (0, faulty, True, True)
    burned = list(h.ledger.faults)
    assert agg.step(m, open_rounds=True) == 0  # the next poll rebases rounds 0 and 1
    train(h, agg, m, blobs, 2)  # round 2 opened on the faulty model: merged, then relinked
    after = [current_tape(agg, blobs, w) for w in range(3)]
    assert [t.rollback_of for t in after] == [t.sha256() for t in before] + [after[2].rollback_of]
    assert faulty not in {i.hotkey for i in after[0].included}
    assert after[1].start_model_sha256 == after[0].new_model_sha256
    assert after[2].start_model_sha256 == after[1].new_model_sha256
    assert all(verify_tape(t, blobs).identical for t in after)  # anyone can recompute them
    assert check_correction(before, {0: {faulty}}, after[:2], blobs) is None
    assert not agg.service.proven_faults("run-1")[0].rollback_due
    opened = agg.service.round_detail("run-1", 3).open.body
    assert opened["start_model_sha256"] == after[2].new_model_sha256  # islands move to it
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [[0, 1], [2]]
    assert h.ledger.faults == burned  # the fault was burned once, when it was proven
    assert len(agg.service.round_detail("run-1", 0).corrections) == 1
    seen = len(events)
    assert agg.step(m, open_rounds=False) == 0 and len(events) == seen  # nothing left to do


def test_an_interrupted_rebase_is_finished_at_the_next_poll(
    merged: Merged,
) -> None:
    h, agg, blobs, events = merged
    m = agg.service.manifest("run-1")
    faulty = h.miners[1].ss58_address
    chain = [current_tape(agg, blobs, 0), current_tape(agg, blobs, 1)]
    prove(h, 0, faulty)
    first = rebase(chain, {0: {faulty}}, blobs)[0]  # only round 0's correction is posted
    body = MergeCorrection(
        supersedes_tape_sha256=first.supersedes.sha256(),
        faults=[FaultRef(round=0, hotkey=faulty)],
        tape=agg.publish(m, first.result),
    )
    agg.service.post_correction(agg.seal("merge-correction", body.model_dump(mode="json")))
    [fault] = agg.service.proven_faults("run-1")
    assert fault.rollback_due  # round 1 still starts from the superseded model
    assert agg.step(m, open_rounds=False) == 0
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [[1]]
    assert current_tape(agg, blobs, 1).start_model_sha256 == first.result.tape.new_model_sha256
    assert not agg.service.proven_faults("run-1")[0].rollback_due


def _correction(agg: Aggregator, index: int, **change: Any) -> dict[str, Any]:
    """A correction body for round ``index`` built from its current record."""
    current = agg.service.round_detail("run-1", index).current_merge()
    assert current is not None
    tape = {**current.model_dump(mode="json"), "tape_sha256": "ee" * 32, **change.pop("tape", {})}
    body = {"supersedes_tape_sha256": current.tape_sha256, "tape": tape,
            "faults": [{"round": 0, "hotkey": agg.service.roster("run-1")[1].hotkey}]}  # fmt: skip
    return {**body, **change}


def _post(h: Harness, body: dict[str, Any]) -> Any:
    return h.client.post(
        "/worker/v1/merge-correction", json=signed(AGG, "merge-correction", body), headers=WORKER
    )


def test_the_service_refuses_corrections_that_are_not_a_proven_rollback(
    merged: Merged,
) -> None:
    h, agg, _, _ = merged
    faulty = agg.service.roster("run-1")[1].hotkey
    others = [e.hotkey for e in agg.service.roster("run-1") if e.hotkey != faulty]
    answer = _post(h, _correction(agg, 0, tape={"included": others}))
    assert answer.status_code == 403 and answer.json()["error"] == "fault_not_proven"
    prove(h, 0, faulty)
    forged = _correction(agg, 0, supersedes_tape_sha256="ab" * 32, tape={"included": others})
    assert _post(h, forged).json()["error"] == "superseded"
    still = _post(h, _correction(agg, 0))
    assert still.status_code == 400 and "proven-faulty" in still.text
    other = _correction(
        agg, 0, faults=[{"round": 0, "hotkey": others[0]}], tape={"included": others}
    )
    assert _post(h, other).json()["error"] == "fault_not_proven"
    later = _correction(agg, 0, faults=[{"round": 1, "hotkey": faulty}], tape={"included": others})
    assert _post(h, later).json()["error"] == "fault_not_proven"  # a later round's fault
    broken = _correction(agg, 1, tape={"start_model_sha256": "cd" * 32})
    assert _post(h, broken).json()["error"] == "broken_chain"
    same = _correction(agg, 1)  # round 1's start did not move: nothing to correct yet
    assert _post(h, same).json()["error"] == "nothing_to_correct"
    good = _correction(agg, 0, tape={"included": others})
    bare = h.client.post("/worker/v1/merge-correction", json=signed(AGG, "merge-correction", good))
    assert bare.status_code == 401  # the worker token, as for every worker route
    assert _post(h, good).status_code == 200
    assert _post(h, good).json()["error"] == "superseded"  # a tape is superseded once
    assert agg.service.round_detail("run-1", 0).current_merge().tape_sha256 == "ee" * 32  # type: ignore[union-attr]
    with pytest.raises(ServiceError, match="superseded"):
        agg.service.post_correction(agg.seal("merge-correction", good))


def test_the_devnet_summary_reads_the_rollback_from_the_service(
    merged: Merged,
) -> None:
    """The devnet's rollback row comes from ``/faults`` and the signed corrections."""
    from hypertrain.devnet.rollbacks import rollback_line, rollback_rows

    h, agg, blobs, _ = merged
    m = agg.service.manifest("run-1")
    faulty = h.miners[1].ss58_address

    def rows() -> list[dict[str, Any]]:
        summaries = agg.service.rounds("run-1")
        details = {s.round: agg.service.round_detail("run-1", s.round) for s in summaries}
        starts = {s.round: s.start_model_sha256 for s in summaries}
        names = {faulty: "island-2"}
        return rollback_rows(agg.service.proven_faults("run-1"), details, starts, names)

    assert rows() == [] and rollback_line([]).startswith("none")
    prove(h, 0, faulty)
    [due] = rows()
    assert (due["round"], due["corrected"], due["depth"]) == (0, False, None)
    assert rollback_line([due]) == "round 0: due, not yet corrected"
    assert agg.step(m, open_rounds=True) == 0  # rebases rounds 0 and 1
    [done] = rows()
    assert (done["corrected"], done["depth"], done["corrected_rounds"]) == (True, 1, [0, 1])
    assert done["corrected_model_sha256"] == current_tape(agg, blobs, 0).new_model_sha256
    assert done["head_model_sha256"] == current_tape(agg, blobs, 1).new_model_sha256
    # round 2 opened on the old model before the rollback: no round opened on it yet
    assert (done["island"], done["resumed_round"]) == ("island-2", None)
    assert rollback_line([done]) == (
        f"round 0 island-2 {faulty[:8]}… (depth 1): corrected model"
        f" {done['corrected_model_sha256'][:12]}…"
    )
