"""Storage of the honeypot periods: each period's committed list hash and, once revealed,
the list itself (``honeypot_periods``; the legacy ``honeypot_reveals`` was copied into it
by a migration). The caller holds the transaction."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from hypertrain.protocol.honeypots import HoneypotPeriod


@dataclass(frozen=True, slots=True)
class PeriodRow:
    """A committed period, with its list (JSON) once revealed."""

    period: int
    first_round: int
    last_round: int
    commitment: str
    committed_beacon_round: int
    list_json: str | None
    revealed_beacon_round: int | None


def periods(conn: sqlite3.Connection, run_id: str) -> list[PeriodRow]:
    """Every stored period of a run, in order."""
    rows = conn.execute(
        "SELECT * FROM honeypot_periods WHERE run_id = ? ORDER BY period", (run_id,)
    )
    return [
        PeriodRow(
            period=r["period"],
            first_round=r["first_round"],
            last_round=r["last_round"],
            commitment=r["commitment"],
            committed_beacon_round=r["committed_beacon_round"],
            list_json=r["list_json"],
            revealed_beacon_round=r["revealed_beacon_round"],
        )
        for r in rows
    ]


def add_period(
    conn: sqlite3.Connection, run_id: str, body: HoneypotPeriod, at: int, *, ignore: bool = False
) -> None:
    """Store a period's commitment at beacon round ``at`` (``ignore``: keep a stored one;
    otherwise a stored one raises ``sqlite3.IntegrityError``)."""
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    conn.execute(
        f"{verb} INTO honeypot_periods (run_id, period, first_round, last_round, commitment,"
        " committed_beacon_round) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, body.period, body.first_round, body.last_round, body.commitment, at),
    )


def reveal_period(
    conn: sqlite3.Connection, run_id: str, period: int, list_json: str, at: int
) -> None:
    """Store a period's revealed list at beacon round ``at`` (once: a revealed list stays)."""
    conn.execute(
        "UPDATE honeypot_periods SET list_json = ?, revealed_beacon_round = ?"
        " WHERE run_id = ? AND period = ? AND list_json IS NULL",
        (list_json, at, run_id, period),
    )
