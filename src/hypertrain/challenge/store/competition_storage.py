"""Storage of competition mode's tables: competitions, commitments and reveals, and each
settled cycle's standings.

This module owns competition mode's tables: every read returns typed rows, every write
takes typed values, and the caller holds the transaction (a refused message changes
nothing). Its part :mod:`.cycle_storage` holds the SQL of the cycles and their scores.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from hypertrain.competition.messages import CycleResult


@dataclass(frozen=True, slots=True)
class CompetitionRow:
    competition_id: str
    start_beacon_round: int


@dataclass(frozen=True, slots=True)
class NewCompetition:
    """A competition as it is created: its spec, the signed spec and its digest."""

    competition_id: str
    spec_json: str
    spec_envelope: str
    spec_digest: str
    start_beacon_round: int
    created_at: float


@dataclass(frozen=True, slots=True)
class CommitRow:
    """A commitment, and once revealed its model hash, file list (JSON) and URL."""

    commitment: str
    hotkey: str
    commit_beacon_round: int
    commit_id: str
    seq: int
    model_sha256: str | None
    files: str | None
    base_url: str | None


@dataclass(frozen=True, slots=True)
class RevealedRow:
    """A revealed commitment: the model, its file list (JSON) and where it is served."""

    commitment: str
    hotkey: str
    commit_beacon_round: int
    seq: int
    model_sha256: str
    files: str
    base_url: str


@dataclass(frozen=True, slots=True)
class NewCommit:
    competition_id: str
    commitment: str
    hotkey: str
    commit_beacon_round: int
    commit_id: str
    envelope: str


@dataclass(frozen=True, slots=True)
class Reveal:
    """What a reveal adds to a commitment."""

    competition_id: str
    commitment: str
    model_sha256: str
    files: str
    base_url: str
    envelope: str
    revealed_beacon_round: int


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One hotkey's standing in a settled cycle."""

    hotkey: str
    model_sha256: str
    mean_loss: float | None
    wins: int
    comparisons: int
    win_rate: float
    weight: float
    units: int
    counted: bool  # it counted in the cycle (a reference that did not has no wins or weight)


def competitions(conn: sqlite3.Connection) -> list[CompetitionRow]:
    """Every competition, by id."""
    rows = conn.execute("SELECT * FROM competitions ORDER BY competition_id")
    return [CompetitionRow(r["competition_id"], r["start_beacon_round"]) for r in rows]


def spec_json(conn: sqlite3.Connection, competition_id: str) -> str | None:
    """A competition's spec (JSON); None: no such competition."""
    row = conn.execute(
        "SELECT spec_json FROM competitions WHERE competition_id = ?", (competition_id,)
    ).fetchone()
    return None if row is None else str(row["spec_json"])


def spec_envelope(conn: sqlite3.Connection, competition_id: str) -> str | None:
    """The coordinator-signed spec envelope (JSON); None: no such competition."""
    row = conn.execute(
        "SELECT spec_envelope FROM competitions WHERE competition_id = ?", (competition_id,)
    ).fetchone()
    return None if row is None else str(row["spec_envelope"])


def add_competition(conn: sqlite3.Connection, new: NewCompetition) -> None:
    """Store a competition (raises ``sqlite3.IntegrityError`` when the id is taken)."""
    conn.execute(
        "INSERT INTO competitions VALUES (?, ?, ?, ?, ?, ?)",
        (new.competition_id, new.spec_json, new.spec_envelope, new.spec_digest,
         new.start_beacon_round, new.created_at),
    )  # fmt: skip


def _commit(r: sqlite3.Row) -> CommitRow:
    return CommitRow(
        commitment=r["commitment"],
        hotkey=r["hotkey"],
        commit_beacon_round=r["commit_beacon_round"],
        commit_id=r["commit_id"],
        seq=r["seq"],
        model_sha256=r["model_sha256"],
        files=r["files"],
        base_url=r["base_url"],
    )


def add_commit(conn: sqlite3.Connection, new: NewCommit) -> None:
    """Store a commitment, numbered after the competition's last one (raises
    ``sqlite3.IntegrityError`` when it was already recorded)."""
    conn.execute(
        "INSERT INTO compete_commits (competition_id, commitment, hotkey,"
        " commit_beacon_round, commit_id, envelope, seq) VALUES (?, ?, ?, ?, ?, ?,"
        " (SELECT COALESCE(MAX(seq), 0) + 1 FROM compete_commits"
        " WHERE competition_id = ?))",
        (new.competition_id, new.commitment, new.hotkey, new.commit_beacon_round,
         new.commit_id, new.envelope, new.competition_id),
    )  # fmt: skip


def commit_of(conn: sqlite3.Connection, competition_id: str, commitment: str) -> CommitRow | None:
    row = conn.execute(
        "SELECT * FROM compete_commits WHERE competition_id = ? AND commitment = ?",
        (competition_id, commitment),
    ).fetchone()
    return None if row is None else _commit(row)


def reveal(conn: sqlite3.Connection, new: Reveal) -> None:
    conn.execute(
        "UPDATE compete_commits SET model_sha256 = ?, files = ?, base_url = ?,"
        " reveal_envelope = ?, revealed_beacon_round = ? WHERE competition_id = ?"
        " AND commitment = ?",
        (new.model_sha256, new.files, new.base_url, new.envelope, new.revealed_beacon_round,
         new.competition_id, new.commitment),
    )  # fmt: skip


def revealed_by(
    conn: sqlite3.Connection, competition_id: str, delay: int, beacon_round: int
) -> list[RevealedRow]:
    """Revealed commitments made at least ``delay`` rounds before ``beacon_round``,
    oldest first (then in the order the service accepted them)."""
    rows = conn.execute(
        "SELECT * FROM compete_commits WHERE competition_id = ? AND model_sha256 IS NOT NULL"
        " AND commit_beacon_round + ? <= ? ORDER BY commit_beacon_round, seq",
        (competition_id, delay, beacon_round),
    )
    return [
        RevealedRow(
            commitment=r["commitment"],
            hotkey=r["hotkey"],
            commit_beacon_round=r["commit_beacon_round"],
            seq=r["seq"],
            model_sha256=r["model_sha256"],
            files=r["files"],
            base_url=r["base_url"],
        )
        for r in rows
    ]


def commits(conn: sqlite3.Connection, competition_id: str) -> list[CommitRow]:
    """Every commitment of a competition, by beacon round and id."""
    rows = conn.execute(
        "SELECT * FROM compete_commits WHERE competition_id = ?"
        " ORDER BY commit_beacon_round, commit_id",
        (competition_id,),
    )
    return [_commit(r) for r in rows]


def submitters(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(competition id, hotkey) of everyone who committed to any competition."""
    rows = conn.execute("SELECT DISTINCT competition_id, hotkey FROM compete_commits")
    return [(r["competition_id"], r["hotkey"]) for r in rows]


def add_results(
    conn: sqlite3.Connection, competition_id: str, number: int, results: Sequence[CycleResult]
) -> None:
    """Store a settled cycle's standings."""
    for r in results:
        conn.execute(
            "INSERT INTO compete_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (competition_id, number, r.hotkey, r.model_sha256, r.mean_loss, r.wins,
             r.comparisons, r.win_rate, r.weight, r.units, r.counted),
        )  # fmt: skip


def results(conn: sqlite3.Connection, competition_id: str, number: int) -> list[ResultRow]:
    """A settled cycle's standings: counted models first, then most units, win rate,
    hotkey and model hash."""
    rows = conn.execute(
        "SELECT * FROM compete_results WHERE competition_id = ? AND cycle = ?"
        " ORDER BY counted DESC, units DESC, win_rate DESC, hotkey, model_sha256",
        (competition_id, number),
    )
    return [
        ResultRow(
            hotkey=r["hotkey"],
            model_sha256=r["model_sha256"],
            mean_loss=r["mean_loss"],
            wins=r["wins"],
            comparisons=r["comparisons"],
            win_rate=r["win_rate"],
            weight=r["weight"],
            units=r["units"],
            counted=bool(r["counted"]),
        )
        for r in rows
    ]


def ever_counted(conn: sqlite3.Connection, cid: str) -> dict[tuple[str, str], bool]:
    """(hotkey, model hash) -> whether it counted in any settled cycle that scored it."""
    rows = conn.execute(
        "SELECT hotkey, model_sha256, MAX(counted) AS counted FROM compete_results"
        " WHERE competition_id = ? GROUP BY hotkey, model_sha256",
        (cid,),
    )
    return {(r["hotkey"], r["model_sha256"]): bool(r["counted"]) for r in rows}
