"""Round assignment: which training samples each island trains on.

Inputs are all public: the run id, the round number, the round-open beacon randomness
(together they give the round key), the roster in the round record's order with each
island's sample budget, the dataset split, and the epoch state left by the previous
round. The rules:

* An *epoch* is one pass over the training split in the order of a keyed
  :class:`~hypertrain.data.permutation.Permutation` of dense training positions.
  Its key is the round key of the round that opened it.
* A round takes the next ``total = sum(budgets)`` positions from the epoch cursor and
  hands them out in roster order: island 0 gets the first ``budget_0`` ids, and so on.
  Slices are disjoint, and so are the ranges of successive rounds in one epoch.
* When fewer than ``total`` positions remain, the remaining tail is left unused and a
  new epoch starts at position 0 under this round's key, so no sample is reused inside
  an epoch and a round never straddles two epochs (which could repeat an id).

The state after a round, :class:`EpochState`, is a pure function of the state before it
and the round's public inputs, so anyone can replay the chain from round 0.

A manifest's warm start (data-parallel steps before round 0) trains on
:func:`warm_start_ids`: passes over the training split, pass ``p`` in the order of a
permutation keyed by the run id, the seed and ``p`` alone (no beacon round exists yet);
each step takes the next ``samples_per_step`` positions of the current pass, and a step
that would not fit in what is left of a pass starts the next one (the tail is unused),
so no step repeats a sample. The rounds' epochs are independent of it, so a warm-start
sample may come again in round 0's epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hypertrain.data.errors import AssignmentError
from hypertrain.data.permutation import KEY_SIZE, Permutation
from hypertrain.data.split import IdArray, Split
from hypertrain.protocol import domains
from hypertrain.protocol.canonical import canonical_bytes

Roster = Sequence[tuple[str, int]]


def derive_assignment_key(run_id: str, round_number: int, beacon_randomness: bytes) -> bytes:
    """``tagged_hash(ASSIGNMENT_KEY, canonical JSON of the three public inputs)``."""
    if round_number < 0:
        raise AssignmentError(f"round number must be >= 0, got {round_number}")
    if not beacon_randomness:
        raise AssignmentError("beacon randomness is empty")
    body = {"randomness": beacon_randomness.hex(), "round": round_number, "run_id": run_id}
    return domains.tagged_hash(domains.ASSIGNMENT_KEY, canonical_bytes(body))


@dataclass(frozen=True, slots=True)
class EpochState:
    """Where the training split's current pass stands after a round."""

    epoch: int
    key: bytes
    cursor: int

    def to_json(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "epoch": self.epoch, "key": self.key.hex()}

    @classmethod
    def from_json(cls, value: Any) -> EpochState:
        if not isinstance(value, dict) or set(value) != {"cursor", "epoch", "key"}:
            raise AssignmentError("epoch state must be an object with cursor, epoch and key")
        try:
            key = bytes.fromhex(value["key"])
        except (TypeError, ValueError) as exc:
            raise AssignmentError("epoch state key must be hex") from exc
        epoch, cursor = value["epoch"], value["cursor"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (epoch, cursor)):
            raise AssignmentError("epoch state epoch and cursor must be integers")
        return cls(epoch, key, cursor)


@dataclass(frozen=True, slots=True)
class RoundAssignment:
    """Each island's sample ids (in training order) and the epoch state afterwards."""

    islands: tuple[tuple[str, IdArray], ...]
    state: EpochState
    epoch_started: bool
    unused_tail: int  # positions left unused when this round started a new epoch

    def for_hotkey(self, hotkey: str) -> list[int]:
        for name, ids in self.islands:
            if name == hotkey:
                return [int(i) for i in ids]
        raise AssignmentError(f"hotkey {hotkey} is not in this round's roster")


def _check_roster(roster: Roster) -> int:
    seen: set[str] = set()
    total = 0
    for hotkey, budget in roster:
        if hotkey in seen:
            raise AssignmentError(f"hotkey {hotkey} appears twice in the roster")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise AssignmentError(f"budget of {hotkey} must be a non-negative integer")
        seen.add(hotkey)
        total += budget
    return total


def _check_state(state: EpochState, train_count: int) -> None:
    if len(state.key) != KEY_SIZE or state.epoch < 0 or not 0 <= state.cursor <= train_count:
        raise AssignmentError(
            f"epoch state is inconsistent with a training split of {train_count} samples"
        )


def assign_round(
    round_key: bytes, roster: Roster, split: Split, state: EpochState | None
) -> RoundAssignment:
    """Assign this round's samples; ``state`` is None before the first round."""
    if len(round_key) != KEY_SIZE:
        raise AssignmentError(f"round key must be {KEY_SIZE} bytes, got {len(round_key)}")
    total = _check_roster(roster)
    if split.train_count == 0:
        raise AssignmentError("the training split is empty")
    if total > split.train_count:
        raise AssignmentError(
            f"roster asks for {total} samples, the training split has {split.train_count}"
        )
    unused = 0
    if state is None:
        state, started = EpochState(0, round_key, 0), True
    else:
        _check_state(state, split.train_count)
        started = state.cursor + total > split.train_count
        if started:
            unused = split.train_count - state.cursor
            state = EpochState(state.epoch + 1, round_key, 0)
    positions = Permutation(state.key, split.train_count).range(state.cursor, state.cursor + total)
    ids = split.train_ids(positions)
    bounds = np.cumsum([0, *(budget for _, budget in roster)])
    islands = tuple(
        (hotkey, ids[bounds[k] : bounds[k + 1]]) for k, (hotkey, _) in enumerate(roster)
    )
    after = EpochState(state.epoch, state.key, state.cursor + total)
    return RoundAssignment(islands, after, started, unused)


def warm_start_key(run_id: str, seed: int, pass_index: int) -> bytes:
    """``tagged_hash(WARM_START_KEY, canonical JSON of the pass, run id and seed)``."""
    body = {"pass": pass_index, "run_id": run_id, "seed": seed}
    return domains.tagged_hash(domains.WARM_START_KEY, canonical_bytes(body))


def warm_start_ids(
    run_id: str, seed: int, split: Split, steps: int, samples_per_step: int
) -> list[IdArray]:
    """The training ids of each warm-start step, in order (disjoint, none held out)."""
    if steps < 1 or samples_per_step < 1:
        raise AssignmentError("a warm start needs at least one step of at least one sample")
    n, b = split.train_count, samples_per_step
    if b > n:
        raise AssignmentError(
            f"a warm-start step of {b} samples does not fit the training split of {n}"
        )
    per_pass = n // b
    out: list[IdArray] = []
    for t in range(steps):
        p, k = divmod(t, per_pass)
        if k == 0:
            order = Permutation(warm_start_key(run_id, seed, p), n)
        out.append(split.train_ids(order.range(k * b, (k + 1) * b)))
    return out
