"""Which check of a verdict a dispute contests, and the segments it may name."""

from __future__ import annotations

import pytest

from hypertrain.dispute.admissible import disputed_check
from hypertrain.dispute.errors import InadmissibleError


@pytest.mark.parametrize(
    ("check", "leaf", "update", "segment", "want"),
    [
        ("segment", 3, False, 2, "segment"),
        (None, 3, False, 2, "segment"),
        ("start", 0, False, 1, "start"),
        (None, 0, True, 0, "start"),
        ("update", 4, True, 3, "update"),
        (None, 4, True, 3, "update"),  # an older verdict at the last leaf: no game, re-audit
    ],
)
def test_admissible_disputes(
    check: str | None, leaf: int, update: bool, segment: int, want: str
) -> None:
    got = disputed_check(
        check=check, first_bad_leaf=leaf, update_checked=update,  # type: ignore[arg-type]
        num_segments=4, segment=segment,
    )  # fmt: skip
    assert got == want


@pytest.mark.parametrize(("check", "leaf", "segment"), [
    ("segment", 3, 3), ("segment", 3, 0), (None, 2, 3), ("segment", None, 0), ("segment", 0, 0),
])  # fmt: skip
def test_a_dispute_of_any_other_segment_is_refused(
    check: str | None, leaf: int | None, segment: int
) -> None:
    with pytest.raises(InadmissibleError):
        disputed_check(
            check=check, first_bad_leaf=leaf, update_checked=True,  # type: ignore[arg-type]
            num_segments=4, segment=segment,
        )  # fmt: skip
