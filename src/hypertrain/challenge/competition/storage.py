"""Storage of competition mode's tables: competitions, commitments and reveals, cycles,
scores and standings.

This module owns those tables: every read returns typed rows, every write takes typed
values, and the caller holds the transaction (a refused message changes nothing).
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
class CycleRow:
    """An opened cycle: its beacon round, its deadline, its task (JSON) and whether closed."""

    cycle: int
    beacon_round: int
    score_deadline: int
    task: str
    closed: bool


@dataclass(frozen=True, slots=True)
class NewCycle:
    competition_id: str
    cycle: int
    beacon_round: int
    randomness: str
    pages_key: str
    score_deadline: int
    task: str


@dataclass(frozen=True, slots=True)
class ScoreRow:
    model_sha256: str
    evaluator: str
    losses_f32: str


@dataclass(frozen=True, slots=True)
class NewScore:
    competition_id: str
    cycle: int
    model_sha256: str
    evaluator: str
    losses_f32: str
    envelope: str
    received_beacon_round: int


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


def _cycle(r: sqlite3.Row) -> CycleRow:
    return CycleRow(
        r["cycle"], r["beacon_round"], r["score_deadline"], r["task"], bool(r["closed"])
    )


def cycle(conn: sqlite3.Connection, competition_id: str, number: int) -> CycleRow | None:
    row = conn.execute(
        "SELECT * FROM compete_cycles WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    ).fetchone()
    return None if row is None else _cycle(row)


def open_cycles(conn: sqlite3.Connection, competition_id: str) -> list[int]:
    """The cycles of a competition not closed yet."""
    rows = conn.execute(
        "SELECT cycle FROM compete_cycles WHERE competition_id = ? AND closed = 0",
        (competition_id,),
    )
    return [int(r["cycle"]) for r in rows]


def newest_open_cycle(conn: sqlite3.Connection, competition_id: str) -> CycleRow | None:
    row = conn.execute(
        "SELECT * FROM compete_cycles WHERE competition_id = ? AND closed = 0"
        " ORDER BY cycle DESC LIMIT 1",
        (competition_id,),
    ).fetchone()
    return None if row is None else _cycle(row)


def latest_closed_cycle(conn: sqlite3.Connection, competition_id: str) -> int | None:
    row = conn.execute(
        "SELECT MAX(cycle) AS c FROM compete_cycles WHERE competition_id = ? AND closed = 1",
        (competition_id,),
    ).fetchone()
    return None if row["c"] is None else int(row["c"])


def cycle_tasks(conn: sqlite3.Connection, competition_id: str) -> list[str]:
    """The task (JSON) of every opened cycle of a competition."""
    rows = conn.execute(
        "SELECT task FROM compete_cycles WHERE competition_id = ?", (competition_id,)
    )
    return [str(r["task"]) for r in rows]


def add_cycle(conn: sqlite3.Connection, new: NewCycle) -> None:
    """Store an opened cycle (a cycle already stored is kept as it is)."""
    conn.execute(
        "INSERT OR IGNORE INTO compete_cycles (competition_id, cycle, beacon_round,"
        " randomness, pages_key, score_deadline, task) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new.competition_id, new.cycle, new.beacon_round, new.randomness, new.pages_key,
         new.score_deadline, new.task),
    )  # fmt: skip


def close_cycle(conn: sqlite3.Connection, competition_id: str, number: int) -> None:
    conn.execute(
        "UPDATE compete_cycles SET closed = 1 WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    )


def scores(conn: sqlite3.Connection, competition_id: str, number: int) -> list[ScoreRow]:
    """Every score stored for a cycle."""
    rows = conn.execute(
        "SELECT model_sha256, evaluator, losses_f32 FROM compete_scores"
        " WHERE competition_id = ? AND cycle = ?",
        (competition_id, number),
    )
    return [ScoreRow(r["model_sha256"], r["evaluator"], r["losses_f32"]) for r in rows]


def scored_by(
    conn: sqlite3.Connection, competition_id: str, number: int, evaluator: str
) -> list[str]:
    """The model hashes ``evaluator`` scored in a cycle, sorted."""
    rows = conn.execute(
        "SELECT model_sha256 FROM compete_scores WHERE competition_id = ? AND cycle = ?"
        " AND evaluator = ? ORDER BY model_sha256",
        (competition_id, number, evaluator),
    )
    return [str(r["model_sha256"]) for r in rows]


def score_envelopes(conn: sqlite3.Connection, competition_id: str, number: int) -> list[str]:
    """The signed scores (JSON) of a cycle, by evaluator and model hash."""
    rows = conn.execute(
        "SELECT envelope FROM compete_scores WHERE competition_id = ? AND cycle = ?"
        " ORDER BY evaluator, model_sha256",
        (competition_id, number),
    )
    return [str(r["envelope"]) for r in rows]


def add_score(conn: sqlite3.Connection, new: NewScore) -> None:
    """Store a score (raises ``sqlite3.IntegrityError`` when the evaluator already
    scored that model in that cycle)."""
    conn.execute(
        "INSERT INTO compete_scores VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new.competition_id, new.cycle, new.model_sha256, new.evaluator, new.losses_f32,
         new.envelope, new.received_beacon_round),
    )  # fmt: skip


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
