"""A run's verified round-open records and sample-assignment chain, read once per process.

Every island's samples in round ``w`` depend on the round-open records of rounds
``0..w`` (one keyed permutation per epoch, walked by every roster so far:
:func:`~hypertrain.evidence.inputs.iter_round_assignments`). A role that fetched and
verified all of them again for every round paid one service read per earlier round, so
its work per round grew with the run: in a 200-round network an island's preparation
took 0.25 s in round 1 and 12 s in round 199, three times its training, and an audit
1.4 s and 13 s.

A round-open record is written once, when its round opens, and never changes (a
rollback corrects merge tapes, never an open record). :class:`OpenRecords` keeps, for
the life of a long-lived role, the records it has verified and the epoch state after
each round it has assigned, so each round reads, verifies and assigns only what is new.
It is safe to share between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hypertrain.data import DataError, Dataset, EpochState
from hypertrain.data.assignment import RoundAssignment
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import iter_round_assignments
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen

ReadOpen = Callable[[int], Any]  # round -> its signed round-open record (raw)


class OpenRecords:
    """The verified round-open records ``0..w`` of one run, and the assignment chain."""

    def __init__(self, manifest: RunManifest) -> None:
        self.manifest = manifest
        self._lock = threading.Lock()
        self._records: list[RoundOpen] = []
        self._after: dict[str, list[EpochState]] = {}  # dataset root -> after rounds 0..k

    def __len__(self) -> int:
        return len(self._records)

    def upto(self, index: int, read: ReadOpen) -> list[RoundOpen]:
        """The verified records of rounds ``0..index``; ``read(w)`` is called only for
        rounds not read before, in order. Raises what ``read`` or the verification raise
        (:class:`~hypertrain.evidence.errors.VerificationError`), keeping what came before.
        """
        if index < 0:
            raise ValueError(f"round {index} is not a round")
        with self._lock:
            for w in range(len(self._records), index + 1):
                self._records.append(verify_round_open(read(w), self.manifest, w))
            return self._records[: index + 1]

    def sample_ids(self, dataset: Dataset, index: int, hotkey: str) -> list[int]:
        """The ids ``hotkey`` trains on in round ``index`` (its record read before),
        walking the assignment chain on from the last round assigned before."""
        with self._lock:
            if index >= len(self._records):
                raise VerificationError(f"round {index}'s open record has not been read")
            result = self._walk(dataset, self._records[: index + 1])
        return _for(result, index, hotkey)

    def next_ids(self, dataset: Dataset, record: RoundOpen, hotkey: str) -> list[int]:
        """The ids ``hotkey`` would train on in ``record``, the round after the last one
        read, from a record that is not the run's (an overlapped round's prediction,
        :mod:`hypertrain.miner.ahead`): used, never kept."""
        with self._lock:
            if record.round != len(self._records) or record.round == 0:
                raise VerificationError(f"round {record.round} does not follow the rounds read")
            result = self._walk(dataset, [*self._records, record], keep=False)
        return _for(result, record.round, hotkey)

    def _walk(
        self, dataset: Dataset, records: list[RoundOpen], keep: bool = True
    ) -> RoundAssignment:
        """The assignment of ``records[-1]``, walking on from the last epoch state kept
        (``keep``: the states after rounds walked are kept); the lock is held."""
        states = self._after.setdefault(dataset.descriptor.dataset_root, [])
        index = len(records) - 1
        k = min(len(states), index)  # states[k - 1]: the epoch state after round k - 1
        walk = iter_round_assignments(
            self.manifest, dataset, records[k : index + 1], states[k - 1] if k else None
        )
        for result in walk:
            if len(states) == k and (keep or k < index):
                states.append(result.state)
            k += 1
        return result


def _for(result: RoundAssignment, index: int, hotkey: str) -> list[int]:
    try:
        return result.for_hotkey(hotkey)
    except DataError as exc:  # not in the roster
        raise VerificationError(f"assignment of round {index}: {exc}") from exc
