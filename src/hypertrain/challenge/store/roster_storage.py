"""Storage of a run's roster: admission, probation, proven memory and leaving
(a part of the rounds storage).

The policy (who is admitted, how long probation lasts, when a leave takes effect) is
in the intake and admission modules; this module only reads and writes the rows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from hypertrain.challenge.rule import Probation


@dataclass(frozen=True, slots=True)
class NewIsland:
    """An admitted island as it is stored (join request and layout as canonical JSON)."""

    run_id: str
    hotkey: str
    admitted_beacon_round: int
    first_round: int
    probation_until_round: int
    device_class: str
    num_devices: int
    join_body: str
    layout: str


@dataclass(frozen=True, slots=True)
class Membership:
    """An admitted island's standing in the roster: the round it left from, if it left."""

    left_round: int | None


@dataclass(frozen=True, slots=True)
class RosterRow:
    """An admitted island with its commits and the run's last round."""

    hotkey: str
    first_round: int
    probation_until_round: int
    device_class: str
    num_devices: int
    commits: int
    tokens: int
    last_round: int | None
    left_round: int | None  # the first round opened without it, once it left
    proven_memory_bytes: int  # what its admission challenge proved (0: not proven)


def add_island(conn: sqlite3.Connection, new: NewIsland) -> None:
    """Admit an island (``sqlite3.IntegrityError`` when it is already admitted)."""
    conn.execute(
        "INSERT INTO roster (run_id, hotkey, admitted_beacon_round, first_round,"
        " probation_until_round, device_class, num_devices, join_body, layout)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.hotkey,
            new.admitted_beacon_round,
            new.first_round,
            new.probation_until_round,
            new.device_class,
            new.num_devices,
            new.join_body,
            new.layout,
        ),
    )


def membership(conn: sqlite3.Connection, run_id: str, hotkey: str) -> Membership | None:
    """The island's roster standing, None when it was never admitted to the run."""
    row = conn.execute(
        "SELECT left_round FROM roster WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    if row is None:
        return None
    left = row["left_round"]
    return Membership(None if left is None else int(left))


def record_leave(
    conn: sqlite3.Connection, run_id: str, hotkey: str, left_round: int, envelope: str
) -> None:
    """The island trains no round from ``left_round`` on; keeps its signed leave."""
    conn.execute(
        "UPDATE roster SET left_round = ?, leave_envelope = ? WHERE run_id = ? AND hotkey = ?",
        (left_round, envelope, run_id, hotkey),
    )


def extend_probation(conn: sqlite3.Connection, run_id: str, hotkey: str, until: int) -> None:
    """The island's probation lasts at least until round ``until`` (never shortened)."""
    conn.execute(
        "UPDATE roster SET probation_until_round = MAX(probation_until_round, ?)"
        " WHERE run_id = ? AND hotkey = ?",
        (until, run_id, hotkey),
    )


def probation_until(conn: sqlite3.Connection, run_id: str, hotkey: str) -> int | None:
    """The round the island's probation ends (None: not admitted)."""
    row = conn.execute(
        "SELECT probation_until_round FROM roster WHERE run_id = ? AND hotkey = ?",
        (run_id, hotkey),
    ).fetchone()
    return None if row is None else int(row["probation_until_round"])


def probation_records(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, Probation]:
    """hotkey -> its probation as it stands, for each island whose probation ends after
    round ``index``: its end ``u``, whether it committed to round ``u - 1`` and how many of
    its committed rounds before ``u`` are not final yet."""
    rows = conn.execute(
        "SELECT r.hotkey, r.probation_until_round AS u,"
        " EXISTS (SELECT 1 FROM commits c WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey"
        "  AND c.round = r.probation_until_round - 1) AS last_committed,"
        " (SELECT COUNT(*) FROM commits c JOIN rounds d ON d.run_id = c.run_id"
        "  AND d.round = c.round WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey"
        "  AND c.round < r.probation_until_round AND d.phase != 'final') AS open_rounds"
        " FROM roster r WHERE r.run_id = ? AND r.probation_until_round > ?",
        (run_id, index),
    )
    return {
        str(r["hotkey"]): Probation(int(r["u"]), bool(r["last_committed"]), int(r["open_rounds"]))
        for r in rows
    }


def prove_memory(conn: sqlite3.Connection, run_id: str, hotkey: str, proven_bytes: int) -> None:
    """Record the memory an island's admission challenge proved."""
    conn.execute(
        "UPDATE roster SET proven_memory_bytes = ? WHERE run_id = ? AND hotkey = ?",
        (proven_bytes, run_id, hotkey),
    )


def roster(conn: sqlite3.Connection, run_id: str) -> list[RosterRow]:
    """Every admitted island of a run, by hotkey, with its commits and tokens."""
    rows = conn.execute(
        """
        SELECT r.*,
          (SELECT COUNT(*) FROM commits c WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey)
             AS commits,
          (SELECT COALESCE(SUM(tokens), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey) AS tokens,
          (SELECT MAX(round) FROM rounds x WHERE x.run_id = r.run_id) AS last_round
        FROM roster r WHERE r.run_id = ? ORDER BY r.hotkey
        """,
        (run_id,),
    )
    return [
        RosterRow(
            hotkey=r["hotkey"],
            first_round=r["first_round"],
            probation_until_round=r["probation_until_round"],
            device_class=r["device_class"],
            num_devices=r["num_devices"],
            commits=r["commits"],
            tokens=r["tokens"],
            last_round=r["last_round"],
            left_round=r["left_round"],
            proven_memory_bytes=r["proven_memory_bytes"],
        )
        for r in rows
    ]


def join_body(conn: sqlite3.Connection, run_id: str, hotkey: str) -> str | None:
    """The join request an island was admitted with (JSON), if it is admitted."""
    row = conn.execute(
        "SELECT join_body FROM roster WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    return None if row is None else str(row["join_body"])


def islands(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(run id, hotkey) of every island of every run."""
    rows = conn.execute("SELECT run_id, hotkey FROM roster")
    return [(r["run_id"], r["hotkey"]) for r in rows]


def roster_layouts(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, str]]:
    """(hotkey, admitted layout JSON) of a run's islands that have not left, by hotkey."""
    rows = conn.execute(
        "SELECT hotkey, layout FROM roster WHERE run_id = ? AND left_round IS NULL ORDER BY hotkey",
        (run_id,),
    )
    return [(r["hotkey"], r["layout"]) for r in rows]


def roster_keys(conn: sqlite3.Connection, run_id: str) -> frozenset[str]:
    """Every island key of the run's roster (admitted, whether or not it committed)."""
    rows = conn.execute("SELECT hotkey FROM roster WHERE run_id = ?", (run_id,))
    return frozenset(str(r[0]) for r in rows)


def committed_probation(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, int]:
    """hotkey -> the round its probation ends, for each island that committed to a round."""
    rows = conn.execute(
        "SELECT c.hotkey, r.probation_until_round FROM commits c JOIN roster r"
        " ON r.run_id = c.run_id AND r.hotkey = c.hotkey WHERE c.run_id = ? AND c.round = ?",
        (run_id, index),
    )
    return {r["hotkey"]: int(r["probation_until_round"]) for r in rows}
