"""Deadlines every party derives from a round's public schedule."""

from __future__ import annotations

from typing import Final

# Beacon rounds after the audit selection within which an update's first arrival on the
# relay still counts for the merge (slack for a relay clock behind the service's); the
# aggregator and every recomputation apply the same number.
ARRIVAL_MARGIN_ROUNDS: Final = 2


def upload_deadline(selection_beacon_round: int, audit_window_rounds: int) -> int:
    """Last beacon round at which a selected checkpoint may still arrive: half the audit
    window after the selection (the other half is left for the replay itself)."""
    return selection_beacon_round + max(1, audit_window_rounds // 2)


def updates_by_round(selection_beacon_round: int) -> int:
    """Last beacon round (by the relay's arrival record) at which a committed update may
    first arrive and still count for its round's merge: an island uploads its update
    before it commits, so an honest one is always in time, and an update first seen
    later is ``missing_blob`` for every party, whenever it asks."""
    return selection_beacon_round + ARRIVAL_MARGIN_ROUNDS
