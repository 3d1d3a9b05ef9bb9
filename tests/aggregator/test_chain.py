"""The public chain read from round records: which outer state a merge continues.

The records are stood in for by small fakes holding exactly what
:func:`hypertrain.aggregator.chain.previous_outer` reads: each round's signed start model
and its current merge (its latest correction's tape, else the merge).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypertrain.aggregator import chain
from hypertrain.protocol.messages import MergeTape

M0, M1, M2, M1C = (f"{n:064x}" for n in (10, 11, 12, 21))  # M1C: round 0 corrected


@dataclass
class _Detail:
    """A round's open record (its start model) and its current merge (or None)."""

    start: str
    merged: tuple[str, str, str] | None  # (start, new model, outer state)

    @property
    def open(self) -> Any:
        body = {"round": 0, "start_model_sha256": self.start, "start_model_url": "u",
                "beacon_round": 0, "assignment_key": "0" * 64, "roster": [],
                "commit_deadline_round": 0}  # fmt: skip
        return SimpleNamespace(body=body)

    def current_merge(self) -> MergeTape | None:
        if self.merged is None:
            return None
        start, new, outer = self.merged
        return MergeTape.model_construct(
            start_model_sha256=start, new_model_sha256=new, outer_state_sha256=outer
        )


def _outer(details: list[_Detail], index: int) -> str | None:
    return chain.previous_outer(lambda i: details[i], index)  # type: ignore[arg-type, return-value]


def test_a_merge_continues_its_predecessors_outer_state() -> None:
    details = [_Detail(M0, (M0, M1, "o0")), _Detail(M1, (M1, M2, "o1")), _Detail(M2, None)]
    assert (_outer(details, 1), _outer(details, 2)) == ("o0", "o1")


def test_a_round_left_out_of_the_chain_is_skipped() -> None:
    """Round 1 opened on round 0's start (round 0's tape was not cleared in time)."""
    details = [_Detail(M0, (M0, M1, "o0")), _Detail(M0, None)]
    assert _outer(details, 1) is None


def test_a_corrected_round_after_one_that_merged_nothing_continues_it() -> None:
    """Round 1 merged nothing (its model is its start, M1), so round 2 opened on M1 too.
    Round 0's correction moved the chain to M1C: rounds 1 and 2 were replayed onto it,
    and corrected round 2 continues corrected round 1's outer state (the rebase's),
    not round 0's, though round 1 opened on the same model as round 2."""
    details = [
        _Detail(M0, (M0, M1C, "o0c")),
        _Detail(M1, (M1C, M1C, "o1c")),  # corrected: it still merges nothing
        _Detail(M1, (M1C, M2, "o2c")),
    ]
    assert _outer(details, 2) == "o1c"
