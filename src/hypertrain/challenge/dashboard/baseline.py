"""A run's data-parallel baseline curve: published by the operator, drawn by the dashboard.

The operator (``hypertrain devnet``'s baseline thread, or anyone with the admin token)
publishes the held-out loss a data-parallel run reached after each round of this run,
trained on the same tokens; :func:`publish` keeps it, whole, replacing the one before.
The dashboard document carries it (:func:`panel`) with the gap at the latest round both
curves have. It is informational only: an operator's unsigned, unaudited claim that
never feeds a hash, a verdict, a bond or a reward.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from hypertrain.api.baseline import BaselineIn, BaselinePublic
from hypertrain.challenge.dashboard.models import BaselineGap, BaselinePanel, CurvePoint
from hypertrain.challenge.errors import ChallengeError
from hypertrain.challenge.store import baseline_storage
from hypertrain.challenge.store.baseline_storage import BaselineRow
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.sqlite import transaction


def planned_rounds(manifest: RunManifest) -> int:
    """The rounds the run's schedule plans: its inner steps after the warm start, H at a
    time (the last round may be shorter)."""
    round_steps = manifest.inner.total_steps - manifest.first_round_step
    return -(-round_steps // manifest.round.inner_steps)


def publish(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    run_id: str,
    body: BaselineIn,
    current_round: Callable[[], int],
) -> BaselinePublic:
    """Keep ``body`` as the run's baseline (the caller read ``manifest``: unknown_run,
    404, first); a curve longer than the run's planned rounds is ``too_many_rounds`` (400)
    and changes nothing, before the verified beacon round is read (``current_round``).
    Informational only: nothing that feeds a hash, a verdict, a bond or a reward reads it."""
    planned = planned_rounds(manifest)
    if len(body.heldout_loss) > planned:
        raise ChallengeError(
            f"{len(body.heldout_loss)} losses, but run {run_id} plans {planned} rounds",
            code="too_many_rounds",
        )
    row = BaselineRow(body.label, list(body.heldout_loss), current_round())
    with transaction(conn):
        baseline_storage.keep_baseline(conn, run_id, row)
    return _public(run_id, row)


def panel(conn: sqlite3.Connection, run_id: str, curve: list[CurvePoint]) -> BaselinePanel | None:
    """The run's baseline for the dashboard, with its gap to the network's curve at the
    latest round both have (None: no baseline published)."""
    row = baseline_storage.baseline(conn, run_id)
    if row is None:
        return None
    return BaselinePanel(
        label=row.label,
        heldout_loss=row.heldout_loss,
        updated_beacon_round=row.updated_beacon_round,
        gap=gap(curve, row.heldout_loss),
    )


def gap(curve: list[CurvePoint], baseline: list[float]) -> BaselineGap | None:
    """The network's held-out loss against the baseline's (``baseline[r]``: after round
    ``r``) at the latest round both have, in per cent of the baseline's: positive when
    the network's loss is higher. None when no round has both."""
    both = [
        p
        for p in curve
        if p.heldout_loss is not None and p.round < len(baseline) and baseline[p.round] > 0
    ]
    if not both:
        return None
    last = max(both, key=lambda p: p.round)
    assert last.heldout_loss is not None  # filtered above
    theirs = baseline[last.round]
    return BaselineGap(
        round=last.round,
        heldout_loss=last.heldout_loss,
        baseline_loss=theirs,
        gap_pct=100 * (last.heldout_loss / theirs - 1),
    )


def _public(run_id: str, row: BaselineRow) -> BaselinePublic:
    return BaselinePublic(
        run_id=run_id,
        label=row.label,
        heldout_loss=row.heldout_loss,
        updated_beacon_round=row.updated_beacon_round,
    )
