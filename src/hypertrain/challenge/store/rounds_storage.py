"""Storage of a run's record: runs, rounds, the beacon rounds that opened them and chose
their audits, and the settlement of each round.

This module owns the rounds resource's tables: the SQL that opens, moves and settles
rounds and reads them for the public views, the dashboard and the clock lives here and
returns typed rows, so a caller never indexes a database row by a string. Its parts hold
the SQL of the other tables of the same resource, one module each: the roster
(:mod:`.roster_storage`), commits (:mod:`.commit_storage`), audit assignments
(:mod:`.audit_storage`), verdicts with the standing of each verdict
(:mod:`.verdict_storage`), merge tapes, their corrections and proven faults
(:mod:`.merge_storage`) and the late panels of missed assignments
(:mod:`.late_panel_storage`). A query here may read those tables too (a round's counts,
its timing): they are one resource.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from hypertrain.api.models import Phase


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    manifest_digest: str


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One round with its counts: commits, tokens, update bytes, audits, and its merge."""

    round: int
    phase: Phase
    open_beacon_round: int
    commit_deadline: int
    selection_beacon_round: int | None
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    new_model_sha256: str | None
    eval_loss: float | None
    commits: int
    tokens: int
    update_bytes: int
    audits: int
    settled_epoch: int | None


@dataclass(frozen=True, slots=True)
class BeaconRow:
    round: int
    randomness: str
    signature: str


@dataclass(frozen=True, slots=True)
class RoundTiming:
    """Beacon rounds of a round's opening, its last accepted commit and its merge tape."""

    opened: int
    last_commit: int | None
    merged: int | None


def runs(conn: sqlite3.Connection) -> list[RunRow]:
    rows = conn.execute("SELECT run_id, manifest_digest FROM runs ORDER BY run_id")
    return [RunRow(r["run_id"], r["manifest_digest"]) for r in rows]


def manifest_json(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT manifest_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else str(row["manifest_json"])


def manifest_envelope(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT manifest_envelope FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else str(row["manifest_envelope"])


def rounds(conn: sqlite3.Connection, run_id: str) -> list[RoundRow]:
    """Every round of a run, in order, with its counts and its merge."""
    rows = conn.execute(
        """
        SELECT r.*,
          (SELECT COUNT(*) FROM commits c WHERE c.run_id = r.run_id AND c.round = r.round) AS n,
          (SELECT COALESCE(SUM(tokens), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS tokens,
          (SELECT COALESCE(SUM(update_bytes), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS update_bytes,
          (SELECT COUNT(*) FROM audits a WHERE a.run_id = r.run_id AND a.round = r.round)
             AS audits,
          m.new_model_sha256, m.eval_loss
        FROM rounds r LEFT JOIN merges m ON m.run_id = r.run_id AND m.round = r.round
        WHERE r.run_id = ? ORDER BY r.round
        """,
        (run_id,),
    )
    return [
        RoundRow(
            round=r["round"],
            phase=r["phase"],
            open_beacon_round=r["open_beacon_round"],
            commit_deadline=r["commit_deadline"],
            selection_beacon_round=r["selection_beacon_round"],
            audit_close_round=r["audit_close_round"],
            dispute_deadline_round=r["dispute_deadline_round"],
            start_model_sha256=r["start_model_sha256"],
            new_model_sha256=r["new_model_sha256"],
            eval_loss=r["eval_loss"],
            commits=r["n"],
            tokens=r["tokens"],
            update_bytes=r["update_bytes"],
            audits=r["audits"],
            settled_epoch=r["settled_epoch"],
        )
        for r in rows
    ]


def open_envelope(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT open_envelope FROM rounds WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["open_envelope"])


def selection_beacon(conn: sqlite3.Connection, run_id: str, index: int) -> BeaconRow | None:
    """The beacon round that selected a round's audits, once it is stored."""
    row = conn.execute(
        "SELECT b.* FROM beacons b JOIN rounds r ON b.round = r.selection_beacon_round"
        " WHERE r.run_id = ? AND r.round = ?",
        (run_id, index),
    ).fetchone()
    return None if row is None else BeaconRow(row["round"], row["randomness"], row["signature"])


def timing(conn: sqlite3.Connection, run_id: str) -> dict[int, RoundTiming]:
    """round -> the beacon rounds of its opening, last accepted commit and merge."""
    rows = conn.execute(
        """
        SELECT r.round, r.open_beacon_round,
          (SELECT MAX(accepted_beacon_round) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS last_commit,
          (SELECT received_beacon_round FROM merges m
             WHERE m.run_id = r.run_id AND m.round = r.round) AS merged
        FROM rounds r WHERE r.run_id = ?
        """,
        (run_id,),
    )
    return {
        r["round"]: RoundTiming(r["open_beacon_round"], r["last_commit"], r["merged"]) for r in rows
    }


@dataclass(frozen=True, slots=True)
class OpenRound:
    """A round that is not final yet: what the state machine needs to move it."""

    run_id: str
    round: int
    phase: Phase
    commit_deadline: int
    audit_close_round: int | None
    open_envelope: str


def add_run(
    conn: sqlite3.Connection, run_id: str, manifest_json: str, envelope: str, digest: str
) -> None:
    """Store a run (raises ``sqlite3.IntegrityError`` when the id is taken)."""
    conn.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
        (run_id, manifest_json, envelope, digest, time.time()),
    )


def last_round(conn: sqlite3.Connection, run_id: str) -> tuple[int, Phase] | None:
    """(index, phase) of a run's newest round (None before round 0)."""
    row = conn.execute(
        "SELECT round, phase FROM rounds WHERE run_id = ? ORDER BY round DESC LIMIT 1", (run_id,)
    ).fetchone()
    return None if row is None else (int(row["round"]), row["phase"])


@dataclass(frozen=True, slots=True)
class NewRound:
    """A round as it opens: its beacon round, deadlines, start model and signed record."""

    run_id: str
    round: int
    beacon: BeaconRow
    assignment_key: str
    commit_deadline: int
    start_model_sha256: str
    start_model_url: str
    open_envelope: str


def add_round(conn: sqlite3.Connection, new: NewRound) -> None:
    conn.execute(
        "INSERT INTO rounds (run_id, round, phase, open_beacon_round, randomness,"
        " assignment_key, commit_deadline, start_model_sha256, start_model_url,"
        " open_envelope) VALUES (?, ?, 'train', ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.round,
            new.beacon.round,
            new.beacon.randomness,
            new.assignment_key,
            new.commit_deadline,
            new.start_model_sha256,
            new.start_model_url,
            new.open_envelope,
        ),
    )


def remember_beacon(conn: sqlite3.Connection, beacon: BeaconRow) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO beacons VALUES (?, ?, ?)",
        (beacon.round, beacon.randomness, beacon.signature),
    )


def beacon(conn: sqlite3.Connection, number: int) -> BeaconRow | None:
    row = conn.execute("SELECT * FROM beacons WHERE round = ?", (number,)).fetchone()
    return None if row is None else BeaconRow(number, row["randomness"], row["signature"])


def open_rounds(conn: sqlite3.Connection) -> list[OpenRound]:
    """Every round of every run that is not final, by run and round."""
    rows = conn.execute(
        "SELECT run_id, round, phase, commit_deadline, audit_close_round, open_envelope"
        " FROM rounds WHERE phase != 'final' ORDER BY run_id, round"
    )
    return [
        OpenRound(
            r["run_id"],
            r["round"],
            r["phase"],
            r["commit_deadline"],
            r["audit_close_round"],
            r["open_envelope"],
        )
        for r in rows
    ]


def start_audit(
    conn: sqlite3.Connection, run_id: str, index: int, selector: int, close: int, dispute: int
) -> None:
    """A round enters its audit: the selecting beacon round and the two deadlines."""
    conn.execute(
        "UPDATE rounds SET phase = 'audit', selection_beacon_round = ?, audit_close_round = ?,"
        " dispute_deadline_round = ? WHERE run_id = ? AND round = ?",
        (selector, close, dispute, run_id, index),
    )


def set_phase(conn: sqlite3.Connection, run_id: str, index: int, phase: Phase) -> None:
    conn.execute(
        "UPDATE rounds SET phase = ? WHERE run_id = ? AND round = ?", (phase, run_id, index)
    )


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """A round's phase, deadlines, start model and signed open record."""

    run_id: str
    round: int
    phase: Phase
    commit_deadline: int
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    open_envelope: str


def round_record(conn: sqlite3.Connection, run_id: str, index: int) -> RoundRecord | None:
    """Round ``index`` of a run (None: it was never opened)."""
    r = conn.execute(
        "SELECT * FROM rounds WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    if r is None:
        return None
    return RoundRecord(
        run_id=r["run_id"],
        round=r["round"],
        phase=r["phase"],
        commit_deadline=r["commit_deadline"],
        audit_close_round=r["audit_close_round"],
        dispute_deadline_round=r["dispute_deadline_round"],
        start_model_sha256=r["start_model_sha256"],
        open_envelope=r["open_envelope"],
    )


def add_settlements(
    conn: sqlite3.Connection, run_id: str, index: int, paid: dict[str, int], epoch: int
) -> None:
    """Record the tokens each island of a settled round was paid for, at ``epoch``."""
    conn.executemany(
        "INSERT INTO settlements VALUES (?, ?, ?, ?, ?)",
        [(run_id, index, hotkey, tokens, epoch) for hotkey, tokens in paid.items()],
    )


def mark_final(conn: sqlite3.Connection, run_id: str, index: int, epoch: int) -> None:
    """The round is settled at ``epoch``: its phase is ``final``."""
    conn.execute(
        "UPDATE rounds SET phase = 'final', settled_epoch = ? WHERE run_id = ? AND round = ?",
        (epoch, run_id, index),
    )


def settled_rounds(conn: sqlite3.Connection, run_id: str, hotkey: str, first: int) -> list[int]:
    """The final rounds from ``first`` on whose settlement paid ``hotkey``, in order."""
    rows = conn.execute(
        "SELECT s.round FROM settlements s JOIN rounds r"
        " ON r.run_id = s.run_id AND r.round = s.round"
        " WHERE s.run_id = ? AND s.hotkey = ? AND s.round >= ? AND r.phase = 'final'"
        " ORDER BY s.round",
        (run_id, hotkey, first),
    ).fetchall()
    return [int(r["round"]) for r in rows]


@dataclass(frozen=True, slots=True)
class RoundState:
    """A round's phase, its dispute deadline (once audited) and its signed opening."""

    phase: Phase
    dispute_deadline_round: int | None
    open_envelope: str


def round_state(conn: sqlite3.Connection, run_id: str, index: int) -> RoundState | None:
    row = conn.execute(
        "SELECT phase, dispute_deadline_round, open_envelope FROM rounds"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    if row is None:
        return None
    return RoundState(row["phase"], row["dispute_deadline_round"], row["open_envelope"])


def audit_span(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[int, int] | None:
    """A round's selection beacon round and its audit window's last round (None: not
    selected yet)."""
    row = conn.execute(
        "SELECT selection_beacon_round, audit_close_round FROM rounds"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    if row is None or row["selection_beacon_round"] is None:
        return None
    return int(row["selection_beacon_round"]), int(row["audit_close_round"])
