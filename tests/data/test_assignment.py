"""Round assignment: disjoint, no reuse within an epoch, never held-out, recomputable."""

from __future__ import annotations

import numpy as np
import pytest

from hypertrain.data import Dataset, EpochState, Split, assign_round, derive_assignment_key
from hypertrain.data.errors import AssignmentError

RANDOMNESS = bytes.fromhex("a" * 64)


def _split(n: int, heldout: list[int]) -> Split:
    return Split(n, np.array(sorted(heldout), dtype=np.uint64))


def test_key_derivation_is_deterministic_and_binds_every_input() -> None:
    key = derive_assignment_key("run-1", 3, RANDOMNESS)
    assert len(key) == 32 and key == derive_assignment_key("run-1", 3, RANDOMNESS)
    assert key != derive_assignment_key("run-2", 3, RANDOMNESS)
    assert key != derive_assignment_key("run-1", 4, RANDOMNESS)
    assert key != derive_assignment_key("run-1", 3, bytes(32))
    with pytest.raises(AssignmentError):
        derive_assignment_key("run-1", -1, RANDOMNESS)
    with pytest.raises(AssignmentError):
        derive_assignment_key("run-1", 0, b"")


def test_train_ids_skip_heldout() -> None:
    split = _split(10, [0, 3, 4, 9])
    assert split.train_ids(np.arange(6)).tolist() == [1, 2, 5, 6, 7, 8]
    assert split.train_count == 6 and split.is_heldout(3) and not split.is_heldout(5)
    with pytest.raises(AssignmentError):
        split.train_ids([6])


def test_round_slices_are_disjoint_and_sized() -> None:
    split = _split(1000, list(range(0, 1000, 7)))
    roster = [("hk-a", 100), ("hk-b", 0), ("hk-c", 250), ("hk-d", 1)]
    result = assign_round(derive_assignment_key("r", 0, RANDOMNESS), roster, split, None)
    sizes = [len(ids) for _, ids in result.islands]
    assert sizes == [100, 0, 250, 1]
    every = np.concatenate([ids for _, ids in result.islands])
    assert len(set(every.tolist())) == len(every)
    assert not any(split.is_heldout(int(i)) for i in every)
    assert result.for_hotkey("hk-d") == every[-1:].tolist()
    assert result.state.cursor == 351 and result.state.epoch == 0 and result.epoch_started


def test_no_reuse_until_the_split_is_exhausted_then_new_epoch() -> None:
    heldout = [1, 50, 51, 99]
    split = _split(100, heldout)
    roster = [("a", 10), ("b", 15)]
    state: EpochState | None = None
    seen: list[int] = []
    for rnd in range(3):  # 75 of 96 training samples
        res = assign_round(derive_assignment_key("r", rnd, RANDOMNESS), roster, split, state)
        seen += [int(i) for _, ids in res.islands for i in ids]
        state = res.state
    assert len(seen) == len(set(seen)) == 75 and not set(seen) & set(heldout)
    key3 = derive_assignment_key("r", 3, RANDOMNESS)
    res = assign_round(key3, roster, split, state)  # 21 left < 25: new epoch
    assert res.epoch_started and res.unused_tail == 21
    assert res.state == EpochState(1, key3, 25)
    fresh = [int(i) for _, ids in res.islands for i in ids]
    assert len(set(fresh)) == 25 and not set(fresh) & set(heldout)


def test_an_epoch_covers_the_whole_training_split() -> None:
    split = _split(60, [5, 6])
    state = None
    covered: list[int] = []
    for rnd in range(29):
        res = assign_round(derive_assignment_key("r", rnd, RANDOMNESS), [("x", 2)], split, state)
        covered += res.for_hotkey("x")
        state = res.state
    assert sorted(covered) == [i for i in range(60) if i not in (5, 6)]


def test_anyone_recomputes_the_same_assignment(dataset: Dataset) -> None:
    split = dataset.split()
    key = derive_assignment_key("run", 7, RANDOMNESS)
    roster = [("alice", 40), ("bob", 30)]
    a = assign_round(key, roster, split, None)
    b = assign_round(key, roster, dataset.split(), None)
    assert a.for_hotkey("alice") == b.for_hotkey("alice") and a.state == b.state
    held = set(split.heldout_ids.tolist())
    assert not held & set(a.for_hotkey("alice") + a.for_hotkey("bob"))
    assert EpochState.from_json(a.state.to_json()) == a.state


def test_bad_rosters_and_states() -> None:
    split = _split(50, [])
    key = bytes(32)
    with pytest.raises(AssignmentError, match="twice"):
        assign_round(key, [("a", 1), ("a", 2)], split, None)
    with pytest.raises(AssignmentError, match="non-negative"):
        assign_round(key, [("a", -1)], split, None)
    with pytest.raises(AssignmentError, match="training split has 50"):
        assign_round(key, [("a", 51)], split, None)
    with pytest.raises(AssignmentError, match="round key"):
        assign_round(b"x", [("a", 1)], split, None)
    with pytest.raises(AssignmentError, match="inconsistent"):
        assign_round(key, [("a", 1)], split, EpochState(0, key, 51))
    with pytest.raises(AssignmentError, match="empty"):
        assign_round(key, [("a", 0)], _split(2, [0, 1]), None)
    with pytest.raises(AssignmentError, match="not in this round"):
        assign_round(key, [("a", 1)], split, None).for_hotkey("b")
    with pytest.raises(AssignmentError):
        EpochState.from_json({"epoch": 0, "key": "zz", "cursor": 0})
    with pytest.raises(AssignmentError):
        EpochState.from_json({"epoch": True, "key": "00", "cursor": 0})
