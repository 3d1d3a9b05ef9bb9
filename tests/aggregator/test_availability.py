"""Availability judged once: by the relay's arrival record against the tape's deadline."""

from __future__ import annotations

import pytest

from hypertrain.aggregator.availability import UndecidedError, check_arrival
from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.errors import AggregatorError, BlobError
from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.rebase import rebase
from hypertrain.aggregator.verify import verify_tape
from hypertrain.protocol.deadlines import ARRIVAL_MARGIN_ROUNDS, updates_by_round
from tests.aggregator.helpers import World

BY = 120


def _blobs(now: int, arrivals: dict[bytes, int | None]) -> tuple[MemoryBlobs, dict[bytes, str]]:
    blobs, shas = MemoryBlobs(), {}
    blobs.now = now
    for data, arrived in arrivals.items():
        shas[data] = blobs.put(data, kind="update", round=0)
        if arrived is not None:
            blobs.arrivals[shas[data]] = arrived
    return blobs, shas


def test_an_update_counts_only_if_it_arrived_by_the_deadline() -> None:
    blobs, shas = _blobs(BY + 1, {b"early": BY - 5, b"edge": BY, b"late": BY + 1})
    check_arrival(blobs, shas[b"early"], BY)
    check_arrival(blobs, shas[b"edge"], BY)
    with pytest.raises(BlobError) as caught:
        check_arrival(blobs, shas[b"late"], BY)
    assert caught.value.reason == "missing_blob"


def test_absent_and_late_read_the_same_and_absence_waits_for_the_relay_clock() -> None:
    blobs, shas = _blobs(BY, {b"late": BY + 1})
    absent = "ab" * 32
    with pytest.raises(UndecidedError):  # the relay's clock is not past the deadline
        check_arrival(blobs, absent, BY)
    blobs.now = BY + 1
    with pytest.raises(BlobError) as gone:
        check_arrival(blobs, absent, BY)
    with pytest.raises(BlobError) as late:
        check_arrival(blobs, shas[b"late"], BY)
    assert gone.value.reason == late.value.reason == "missing_blob"
    assert str(gone.value).split("…")[1] == str(late.value).split("…")[1]  # one text


def test_a_held_blob_without_a_record_is_missing_and_a_source_without_records_refused() -> None:
    class Unrecorded(MemoryBlobs):
        def arrival_round(self, sha256: str) -> int | None:
            return None

    blobs = Unrecorded()
    sha = blobs.put(b"x", kind="update", round=0)
    with pytest.raises(BlobError):
        check_arrival(blobs, sha, BY)

    class Plain:
        def get(self, sha256: str) -> bytes:
            return b""

    with pytest.raises(AggregatorError):
        check_arrival(Plain(), sha, BY)


def test_the_deadline_is_the_selection_plus_the_documented_margin() -> None:
    assert updates_by_round(100) == 100 + ARRIVAL_MARGIN_ROUNDS


def test_a_rollback_replay_reproduces_the_original_inclusion_decision() -> None:
    """Round 0 merged with island 2's update missing; the update arrives later; a fault
    proven for island 0 replays the round: island 2 stays out, with the same entry."""
    w = World()
    for index in range(4):
        w.add(index)
    late = w.candidates[2]
    held = w.blobs.data.pop(late.update_sha256)  # not on the relay at the merge
    w.blobs.now = BY + 1
    original = merge(w.inputs(updates_by_round=BY), w.blobs)
    [gone] = [e for e in original.tape.excluded if e.hotkey == late.hotkey]
    assert gone.reason == "missing_blob"
    w.blobs.data[late.update_sha256] = held  # uploaded after the tape
    w.blobs.arrivals[late.update_sha256] = BY + 3
    w.blobs.now = BY + 9
    assert verify_tape(original.tape, w.blobs).identical  # verify-tape agrees, later too
    [fixed] = rebase([original.tape], {0: {w.candidates[0].hotkey}}, w.blobs)
    tape = fixed.result.tape
    assert tape.updates_by_round == BY
    assert [e for e in tape.excluded if e.hotkey == late.hotkey] == [gone]
    assert late.hotkey not in {i.hotkey for i in tape.included}
    assert {i.hotkey for i in tape.included} == {w.candidates[1].hotkey, w.candidates[3].hotkey}
