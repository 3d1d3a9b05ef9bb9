"""Deadlines every party derives from a round's public schedule."""

from __future__ import annotations


def upload_deadline(selection_beacon_round: int, audit_window_rounds: int) -> int:
    """Last beacon round at which a selected checkpoint may still arrive: half the audit
    window after the selection (the other half is left for the replay itself)."""
    return selection_beacon_round + max(1, audit_window_rounds // 2)
