"""After a rollback, rounds open on the corrected chain (against the real service, with one
tape witness required).

A corrected round's witness wait used to count from its first tape's arrival, so a
correction witnessed after that wait was left out at once, and the next round opened on
that round's start model as first signed, which the correction had replaced: on a loaded
``hypertrain devnet --scenario rollback`` every round from 3 on opened on the superseded
round-1 model and needed a correction of its own. Now a correction citing a proven fault
restarts its round's wait (``rollbacks.wait_start``), a round left out of the chain
hands on the model it continues on the current chain (``rollbacks.continued_model``),
and both are read from the database alone, so a restarted service answers the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.runner import Aggregator
from hypertrain.aggregator.witness import Witness
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.errors import PhaseError
from hypertrain.challenge.rounds import chain
from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.manifest import RunManifest
from tests.aggregator.conftest import WITNESS_WAIT
from tests.aggregator.service_chain import aggregator_for, client_for, prove, to_merge
from tests.challenge.conftest import Harness
from tests.challenge.helpers import join_body, signed

Chain = tuple[Aggregator, MemoryBlobs, Witness, list[Any], RunManifest]


def _witnessed_rounds(h: Harness, tmp: Path, count: int) -> Chain:
    """Rounds ``0..count-1`` merged, witnessed and final; round ``count`` open on the last."""
    blobs, events = MemoryBlobs(), list[Any]()
    agg = aggregator_for(h, tmp, blobs, events, client_for(h))
    m = agg.service.manifest("run-1")
    for key in h.miners[:3]:
        assert h.client.post("/v1/join", json=signed(key, "join", join_body())).status_code == 200
    witness = Witness(client_for(h), blobs, h.outsider, "run-1", lambda event: None)
    agg.step(m, open_rounds=True)
    for index in range(count):
        _merge(h, agg, m, blobs, index)
        _drain(witness, m)
        h.tick(3)  # witnessed and past its dispute window: final
        agg.step(m, open_rounds=True)
        assert _start(agg, index + 1) == _model(agg, index)
    return agg, blobs, witness, events, m


def _merge(h: Harness, agg: Aggregator, m: RunManifest, blobs: MemoryBlobs, index: int) -> None:
    to_merge(h, agg, m, blobs, index)
    agg.merge_round(m, index)  # the merge alone: its correction, if due, comes later


def _drain(witness: Witness, m: RunManifest) -> None:
    while witness.step(m):
        pass


def _start(agg: Aggregator, index: int) -> str:
    start = agg.service.rounds("run-1")[index].start_model_sha256
    assert start is not None
    return start


def _model(agg: Aggregator, index: int) -> str:
    current = agg.service.round_detail("run-1", index).current_merge()
    assert current is not None
    return current.new_model_sha256


def _rolled_back(events: list[Any]) -> list[list[int]]:
    return [e["rounds"] for e in events if e["event"] == "rolled_back"]


def test_a_correction_witnessed_after_the_first_wait_is_in_the_chain(
    witness_harness: Harness, tmp_path: Path
) -> None:
    """Round 2 opened before round 0's fault was rolled back, so it merges on the
    superseded model; its correction arrives after the wait its first tape started. The
    next round waits for the correction's witness (the correction restarted the wait)
    and opens on the corrected model, not on round 2's superseded start."""
    h = witness_harness
    agg, blobs, witness, events, m = _witnessed_rounds(h, tmp_path, 2)
    old_start = _start(agg, 2)
    prove(h, 0, h.miners[1].ss58_address)
    agg.step(m, open_rounds=False)  # rounds 0 and 1 corrected; round 2 still on the old model
    assert _rolled_back(events) == [[0, 1]]
    _merge(h, agg, m, blobs, 2)  # merged on the superseded model
    h.tick(WITNESS_WAIT + 1)  # the first tape's wait is over, no correction yet
    agg.step(m, open_rounds=True)  # the correction of round 2; round 3 waits for it
    assert _rolled_back(events) == [[0, 1], [2]]
    assert events[-1] == {"event": "waiting", "round": 3, "for": "witnesses"}
    h.tick(WITNESS_WAIT)  # still inside the restarted wait
    agg.step(m, open_rounds=True)
    assert len(agg.service.rounds("run-1")) == 3
    _drain(witness, m)  # the witness agrees with the correction, late for the first wait
    agg.step(m, open_rounds=True)
    assert _start(agg, 3) == _model(agg, 2) != old_start
    assert not any(f.rollback_due for f in agg.service.proven_faults("run-1"))


def test_a_deep_fault_is_one_rebase_and_later_rounds_need_no_correction(
    witness_harness: Harness, tmp_path: Path
) -> None:
    """A fault proven three rounds back while round 4 trains on the superseded chain: one
    rebase corrects rounds 1 to 3, round 4's merge on the old model is corrected right
    after it, and with a witness slower than the wait round 5 opens on the model round 4
    continues on the corrected chain (round 4 left out), never on a superseded one; the
    rounds opened after it merge on the corrected chain with no correction."""
    h = witness_harness
    agg, blobs, witness, events, m = _witnessed_rounds(h, tmp_path, 4)
    prove(h, 1, h.miners[2].ss58_address)
    agg.step(m, open_rounds=True)
    assert _rolled_back(events) == [[1, 2, 3]]
    _merge(h, agg, m, blobs, 4)
    agg.step(m, open_rounds=True)  # round 4 corrected onto round 3's corrected model
    assert _rolled_back(events) == [[1, 2, 3], [4]]
    h.tick(WITNESS_WAIT + 1)  # the witness is slower than the wait
    agg.step(m, open_rounds=True)
    corrected_4 = agg.service.round_detail("run-1", 4).current_merge()
    assert corrected_4 is not None
    assert _start(agg, 5) == corrected_4.start_model_sha256 == _model(agg, 3)
    assert _start(agg, 5) not in {_start(agg, w) for w in range(5)}  # none superseded
    _drain(witness, m)
    for index in (5, 6):
        _merge(h, agg, m, blobs, index)
        agg.step(m, open_rounds=False)
        _drain(witness, m)
        h.tick(3)
        agg.step(m, open_rounds=True)
        assert _start(agg, index + 1) == _model(agg, index)
    assert _rolled_back(events) == [[1, 2, 3], [4]]  # rounds 5 and 6 needed none
    assert not any(f.rollback_due for f in agg.service.proven_faults("run-1"))
    assert not [e for e in events if e["event"] == "correction_refused"]


def _next_start(state: ServiceState, index: int) -> tuple[str, str] | str:
    with state.lock:
        try:
            start = chain.next_start(state, "run-1", index, state.due_round())
        except PhaseError as exc:
            return exc.code
    assert start is not None
    return start


def test_a_restarted_service_reaches_the_same_next_start(
    witness_harness: Harness, tmp_path: Path
) -> None:
    """The wait a correction restarted and the model a left-out round hands on are read
    from the database: a second service on the same files answers as the first, while the
    round waits and once it is past the wait."""
    h = witness_harness
    agg, blobs, _, _, m = _witnessed_rounds(h, tmp_path, 2)
    prove(h, 0, h.miners[1].ss58_address)
    agg.step(m, open_rounds=False)
    _merge(h, agg, m, blobs, 2)
    h.tick(WITNESS_WAIT + 1)
    agg.step(m, open_rounds=False)  # round 2's correction, after its first tape's wait
    restarted = create_app(h.state.settings, beacon=h.beacon, ledger=h.ledger)
    with TestClient(restarted) as client:
        again: ServiceState = client.app.state.service  # type: ignore[attr-defined]
        client.portal.call(_poll_beacon, again)  # type: ignore[union-attr]
        assert _next_start(h.state, 3) == _next_start(again, 3) == "unwitnessed"
        h.tick(WITNESS_WAIT + 1)  # the restarted wait is over too, unwitnessed
        client.portal.call(_poll_beacon, again)  # type: ignore[union-attr]
        assert again.due_round() == h.state.due_round()
        skipped = _next_start(h.state, 3)
        assert skipped == _next_start(again, 3)
        corrected = agg.service.round_detail("run-1", 2).current_merge()
        assert corrected is not None
        assert skipped[0] == corrected.start_model_sha256 == _model(agg, 1)
