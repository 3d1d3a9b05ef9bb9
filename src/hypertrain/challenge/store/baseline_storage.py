"""Storage of each run's published baseline curve (``run_baselines``): one row per run,
replaced whole by the operator's next publication. Informational: no other table reads
it, and nothing that feeds a hash, a verdict or a reward does. The table is created by
schema version 16 (:mod:`hypertrain.challenge.migrations.v16_run_baselines`). The caller
holds the transaction."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BaselineRow:
    """A run's baseline: its label, the held-out loss after each round, and when it was
    last replaced (beacon round)."""

    label: str
    heldout_loss: list[float]
    updated_beacon_round: int


def baseline(conn: sqlite3.Connection, run_id: str) -> BaselineRow | None:
    """The run's published baseline (None: none published)."""
    row = conn.execute(
        "SELECT label, heldout_loss, updated_beacon_round FROM run_baselines WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        return None
    losses = [float(x) for x in json.loads(row["heldout_loss"])]
    return BaselineRow(row["label"], losses, int(row["updated_beacon_round"]))


def keep_baseline(conn: sqlite3.Connection, run_id: str, row: BaselineRow) -> None:
    """Store ``row`` as the run's baseline, replacing any earlier one."""
    conn.execute(
        "INSERT OR REPLACE INTO run_baselines VALUES (?, ?, ?, ?)",
        (run_id, row.label, json.dumps(row.heldout_loss), row.updated_beacon_round),
    )
