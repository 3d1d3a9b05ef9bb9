"""Which disputes are admissible: only the check a mismatch verdict names as first failing.

A verdict's first failure decides it (see :mod:`hypertrain.auditor.replay`), so the
disagreement is exactly there: the segment whose end leaf is ``first_bad_leaf``, or
the leaf-0 check, or the update check. A dispute on any other segment could only show
that an honest segment is honest, and is refused. A verdict that does not say which
check failed (older auditors) is read safely: leaf 0 is the start check, and a
mismatch at the last leaf of an update-checked audit may be the update check, which
needs no game: it is re-decided by recomputation.
"""

from __future__ import annotations

from typing import Literal

from hypertrain.dispute.errors import InadmissibleError

Check = Literal["start", "segment", "update"]


def disputed_check(
    *,
    check: Check | None,
    first_bad_leaf: int | None,
    update_checked: bool,
    num_segments: int,
    segment: int,
) -> Check:
    """The check a dispute of ``segment`` contests; refuses any segment but the first bad one."""
    if first_bad_leaf is None:
        raise InadmissibleError("the verdict names no differing leaf: nothing to dispute")
    check = failed_check(
        check=check,
        first_bad_leaf=first_bad_leaf,
        update_checked=update_checked,
        num_segments=num_segments,
    )
    if check == "segment" and segment != first_bad_leaf - 1:
        raise InadmissibleError(
            f"the verdict's first differing leaf is {first_bad_leaf}: only segment"
            f" {first_bad_leaf - 1} can be disputed, not {segment}"
        )
    return check


def failed_check(
    *, check: Check | None, first_bad_leaf: int, update_checked: bool, num_segments: int
) -> Check:
    """The check a mismatch verdict failed, read safely when it does not say (see above)."""
    if check is not None:
        return check
    if first_bad_leaf == 0:
        return "start"
    if first_bad_leaf == num_segments and update_checked:
        return "update"
    return "segment"
