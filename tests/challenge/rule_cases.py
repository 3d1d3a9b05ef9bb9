"""What the settlement rule's tests and the tape rule's tests share: two islands, their
commits and a merge tape naming whom it included and excluded."""

from __future__ import annotations

from hypertrain.challenge.rule import CommitRow
from hypertrain.protocol.messages import MergeTape

A, B = "island-a", "island-b"
COMMITS = [CommitRow(A, 10), CommitRow(B, 20)]


def merge_tape(
    included: list[str] | None = None, excluded: dict[str, str] | None = None
) -> MergeTape:
    """Round 0's tape (its own hash ``dd...``) with these included and excluded islands."""
    return MergeTape.model_validate(
        {
            "round": 0,
            "start_model_sha256": "aa" * 32,
            "new_model_sha256": "bb" * 32,
            "new_model_url": "u",
            "outer_state_sha256": "cc" * 32,
            "tape_sha256": "dd" * 32,
            "included": included or [],
            "excluded": excluded or {},
        }
    )
