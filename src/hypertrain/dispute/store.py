"""The dispute tables of the challenge service's database, and the queries on them.

The service owns the database (its migrations add :data:`SCHEMA`); these functions
take the connection explicitly so settlement can ask :func:`disputes_open` and
:func:`overturned_verdicts` without knowing the game. ``dispute_games`` holds each
game's whole state as JSON (so a restarted service resumes where it stopped);
``dispute_messages`` keeps every accepted signed message, in order, as received.
The service's own tables (verdicts, audits, rounds) are read by the service, which
passes the verdicts these functions need (:class:`JudgedVerdict`); what a decided
game implies for them is the service's rule (``challenge.disputes.decisions``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from hypertrain.dispute.game import Game

SCHEMA: Final = """
CREATE TABLE dispute_games (
    dispute_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    verdict_id TEXT NOT NULL UNIQUE REFERENCES verdicts(verdict_id),
    hotkey TEXT NOT NULL,
    auditor TEXT NOT NULL,
    bond INTEGER NOT NULL,
    stage TEXT NOT NULL,
    outcome TEXT,
    game TEXT NOT NULL,
    opened_beacon_round INTEGER NOT NULL,
    decided_beacon_round INTEGER,
    bytes_in INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dispute_games_round ON dispute_games (run_id, round);
CREATE TABLE dispute_messages (
    dispute_id TEXT NOT NULL REFERENCES dispute_games(dispute_id),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    signer TEXT NOT NULL,
    body TEXT NOT NULL,
    received_beacon_round INTEGER NOT NULL,
    PRIMARY KEY (dispute_id, seq)
);
CREATE TABLE dispute_inputs (
    dispute_id TEXT PRIMARY KEY REFERENCES dispute_games(dispute_id),
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE honeypot_reveals (
    run_id TEXT PRIMARY KEY,
    list_json TEXT NOT NULL,
    revealed_beacon_round INTEGER NOT NULL
);
CREATE TABLE faulty_auditors (
    run_id TEXT NOT NULL,
    auditor TEXT NOT NULL,
    round INTEGER NOT NULL,
    dispute_id TEXT NOT NULL,
    PRIMARY KEY (run_id, auditor, dispute_id)
)
"""
# A faulty auditor's other verdicts of rounds not yet final: they stop counting and the
# assignment is open again for another auditor (see :func:`reassign_verdicts`); and
# ``bond_state``: whether a decided dispute's bond went back to the ledger (returned or
# burned), so a restart settles every bond exactly once.
SCHEMA_2: Final = """
CREATE TABLE reassigned_verdicts (
    verdict_id TEXT PRIMARY KEY REFERENCES verdicts(verdict_id),
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    auditor TEXT NOT NULL,
    dispute_id TEXT NOT NULL,
    reassigned_beacon_round INTEGER NOT NULL
);
CREATE INDEX reassigned_verdicts_round ON reassigned_verdicts (run_id, round, hotkey);
ALTER TABLE dispute_games ADD COLUMN bond_state TEXT
"""

# A fault verdict that arrived after its round's dispute window has a window of its own
# (from its arrival): ``books_fault`` 0, its round is not final yet and settlement waits
# for the window to close; 1, its round was final, and the fault is booked in the ledger
# only once the window closed undisputed or its dispute was upheld (``booked``).
SCHEMA_3: Final = """
CREATE TABLE verdict_windows (
    verdict_id TEXT PRIMARY KEY REFERENCES verdicts(verdict_id),
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    hotkey TEXT NOT NULL,
    result TEXT NOT NULL,
    deadline_round INTEGER NOT NULL,
    books_fault INTEGER NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX verdict_windows_round ON verdict_windows (run_id, round, closed)
"""


class JudgedVerdict(Protocol):
    """A stored verdict as the service reads it: whom it judged, when, and its result."""

    @property
    def verdict_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def hotkey(self) -> str: ...
    @property
    def auditor(self) -> str: ...
    @property
    def result(self) -> str: ...


BondState = Literal["returned", "burned", "missing"]


@dataclass(frozen=True, slots=True)
class DueWindow:
    """An open verdict window that may close now, with its verdict's dispute (if any)."""

    verdict_id: str
    run_id: str
    round: int
    hotkey: str
    result: str
    books_fault: bool
    deadline_round: int
    outcome: str | None  # the dispute's outcome (None: no dispute, or undecided)
    disputed: bool
    set_aside: bool  # another auditor re-judges the verdict


@dataclass(frozen=True, slots=True)
class UnsettledBond:
    dispute_id: str
    run_id: str
    outcome: str


@dataclass(frozen=True, slots=True)
class SetAside:
    """A verdict set aside for another auditor's re-audit, and whether its dispute is
    still gathering re-audits (stage ``recompute``)."""

    round: int
    hotkey: str
    auditor: str
    verdict_id: str
    dispute_id: str
    recompute: bool


def disputes_open(conn: sqlite3.Connection, run_id: str, round: int) -> bool:
    """True while any dispute of the round is undecided, or a late verdict's own dispute
    window is still open: its settlement must wait."""
    row = conn.execute(
        "SELECT 1 FROM dispute_games WHERE run_id = ? AND round = ? AND outcome IS NULL"
        " UNION ALL SELECT 1 FROM verdict_windows WHERE run_id = ? AND round = ? AND closed = 0"
        " LIMIT 1",
        (run_id, round, run_id, round),
    ).fetchone()
    return row is not None


def open_window(
    conn: sqlite3.Connection, verdict: JudgedVerdict, deadline: int, *, books_fault: bool
) -> None:
    """Give a late fault verdict its own dispute window, up to beacon round ``deadline``
    (a ``match`` verdict faults nobody: it gets none)."""
    if verdict.result == "match":
        return
    conn.execute(
        "INSERT OR IGNORE INTO verdict_windows (verdict_id, run_id, round, hotkey, result,"
        " deadline_round, books_fault) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (verdict.verdict_id, verdict.run_id, verdict.round, verdict.hotkey, verdict.result,
         deadline, int(books_fault)),
    )  # fmt: skip


def due_windows(conn: sqlite3.Connection, now: int) -> list[DueWindow]:
    """Open verdict windows that may close at ``now``: past their deadline or disputed."""
    rows = conn.execute(
        "SELECT w.verdict_id, w.run_id, w.round, w.hotkey, w.result, w.books_fault,"
        " w.deadline_round, g.outcome, g.dispute_id IS NOT NULL AS disputed,"
        " x.verdict_id IS NOT NULL AS set_aside FROM verdict_windows w"
        " LEFT JOIN dispute_games g ON g.verdict_id = w.verdict_id"
        " LEFT JOIN reassigned_verdicts x ON x.verdict_id = w.verdict_id"
        " WHERE w.closed = 0 AND (w.deadline_round < ? OR g.outcome IS NOT NULL)"
        " ORDER BY w.verdict_id",
        (now,),
    )
    return [
        DueWindow(
            verdict_id=r["verdict_id"],
            run_id=r["run_id"],
            round=r["round"],
            hotkey=r["hotkey"],
            result=r["result"],
            books_fault=bool(r["books_fault"]),
            deadline_round=r["deadline_round"],
            outcome=r["outcome"],
            disputed=bool(r["disputed"]),
            set_aside=bool(r["set_aside"]),
        )
        for r in rows
    ]


def close_window(conn: sqlite3.Connection, verdict_id: str) -> None:
    conn.execute("UPDATE verdict_windows SET closed = 1 WHERE verdict_id = ?", (verdict_id,))


def overturned_verdicts(conn: sqlite3.Connection, run_id: str, round: int) -> set[str]:
    """Verdicts of the round that a decided dispute overturned (no longer faults)."""
    return {
        r[0]
        for r in conn.execute(
            "SELECT verdict_id FROM dispute_games WHERE run_id = ? AND round = ?"
            " AND outcome = 'overturned'",
            (run_id, round),
        )
    }


def insert_game(conn: sqlite3.Connection, game: Game, verdict_id: str, bond: int, now: int) -> None:
    conn.execute(
        "INSERT INTO dispute_games (dispute_id, run_id, round, verdict_id, hotkey, auditor, bond,"
        " stage, outcome, game, opened_beacon_round) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            game.dispute_id,
            game.run_id,
            game.round,
            verdict_id,
            game.island,
            game.auditor,
            bond,
            game.stage,
            game.outcome,
            game.model_dump_json(),
            now,
        ),
    )


def save_game(conn: sqlite3.Connection, game: Game, now: int, nbytes: int = 0) -> None:
    """Store a game's new state and the beacon round of its decision (the first one).

    What the decision implies for the disputed verdict and its auditor is the service's
    rule (``challenge.disputes.decisions.save``), which calls this first.
    """
    conn.execute(
        "UPDATE dispute_games SET stage = ?, outcome = ?, game = ?, bytes_in = bytes_in + ?,"
        " decided_beacon_round = CASE WHEN ? IS NULL THEN NULL ELSE"
        " COALESCE(decided_beacon_round, ?) END WHERE dispute_id = ?",
        (
            game.stage,
            game.outcome,
            game.model_dump_json(),
            nbytes,
            game.outcome,
            now,
            game.dispute_id,
        ),
    )


def disputed_verdict(conn: sqlite3.Connection, dispute_id: str) -> str:
    """The id of the verdict a stored game disputes."""
    row = conn.execute(
        "SELECT verdict_id FROM dispute_games WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    return str(row[0])


def is_disputed(conn: sqlite3.Connection, verdict_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM dispute_games WHERE verdict_id = ?", (verdict_id,)).fetchone()
    return row is not None


def set_aside(conn: sqlite3.Connection, game: Game, verdict_id: str, now: int) -> None:
    """The disputed verdict stops counting until another auditor re-audits the assignment."""
    conn.execute(
        "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
        (verdict_id, game.run_id, game.round, game.island, game.auditor, game.dispute_id, now),
    )


def restore(conn: sqlite3.Connection, game: Game, verdict_id: str) -> None:
    """A verdict this game set aside counts again (its dispute was upheld)."""
    conn.execute(
        "DELETE FROM reassigned_verdicts WHERE verdict_id = ? AND dispute_id = ?",
        (verdict_id, game.dispute_id),
    )


def mark_faulty(
    conn: sqlite3.Connection, game: Game, now: int, unfinal: Sequence[JudgedVerdict]
) -> None:
    """An independent re-audit agrees the auditor was wrong: bar it, and set aside its
    verdicts ``unfinal`` (those of the run's rounds not final yet)."""
    conn.execute(
        "INSERT OR IGNORE INTO faulty_auditors VALUES (?, ?, ?, ?)",
        (game.run_id, game.auditor, game.round, game.dispute_id),
    )
    reassign_verdicts(conn, game, now, unfinal)


@dataclass(frozen=True, slots=True)
class OutvotedVerdict:
    """A fault verdict the judges' majority of ``match`` outvoted."""

    run_id: str
    round: int
    auditor: str
    verdict_id: str


def bar_outvoted(
    conn: sqlite3.Connection,
    outvoted: OutvotedVerdict,
    now: int,
    unfinal: Sequence[JudgedVerdict],
) -> None:
    """The judges' majority outvoted a verdict and meets the barring rule: bar its
    auditor (the cause is ``outvoted-<verdict id>``, no dispute) and set aside its other
    verdicts ``unfinal`` (the outvoted one keeps its standing)."""
    cause = f"outvoted-{outvoted.verdict_id}"
    conn.execute(
        "INSERT OR IGNORE INTO faulty_auditors VALUES (?, ?, ?, ?)",
        (outvoted.run_id, outvoted.auditor, outvoted.round, cause),
    )
    for v in unfinal:
        if v.verdict_id != outvoted.verdict_id:
            conn.execute(
                "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                (v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, cause, now),
            )


def games_on(conn: sqlite3.Connection, run_id: str, round: int, hotkey: str) -> list[Game]:
    """Every dispute of one island's round."""
    return [
        Game.model_validate_json(r[0])
        for r in conn.execute(
            "SELECT game FROM dispute_games WHERE run_id = ? AND round = ?"
            " AND hotkey = ? ORDER BY dispute_id",
            (run_id, round, hotkey),
        )
    ]


def reassign_verdicts(
    conn: sqlite3.Connection, game: Game, now: int, unfinal: Sequence[JudgedVerdict]
) -> int:
    """Stop counting the faulty auditor's other verdicts in rounds that are not final.

    Those rounds are still in their dispute window (settlement waits for it), so their
    rewards are not fixed yet: each such verdict (``unfinal``, all by ``game.auditor``)
    other than the disputed one is set aside (neither a fault nor a pass) and its
    assignment waits for another auditor's verdict, holding the reward until one comes.
    Returns how many verdicts were re-assigned.
    """
    disputed = disputed_verdict(conn, game.dispute_id)
    moved = 0
    for v in unfinal:
        if v.verdict_id == disputed:
            continue
        cur = conn.execute(
            "INSERT OR IGNORE INTO reassigned_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
            (v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, game.dispute_id, now),
        )
        moved += cur.rowcount
    return moved


def is_faulty(conn: sqlite3.Connection, run_id: str, auditor: str) -> bool:
    """Whether an independent re-audit confirmed a dispute against this auditor."""
    row = conn.execute(
        "SELECT 1 FROM faulty_auditors WHERE run_id = ? AND auditor = ? LIMIT 1",
        (run_id, auditor),
    ).fetchone()
    return row is not None


def unsettled_bonds(conn: sqlite3.Connection) -> list[UnsettledBond]:
    """Decided disputes whose bond the ledger has not returned or burned yet."""
    rows = conn.execute(
        "SELECT dispute_id, run_id, outcome FROM dispute_games WHERE outcome IS NOT NULL"
        " AND bond > 0 AND bond_state IS NULL ORDER BY dispute_id"
    )
    return [UnsettledBond(r["dispute_id"], r["run_id"], r["outcome"]) for r in rows]


def set_bond_state(conn: sqlite3.Connection, dispute_id: str, bond_state: BondState) -> None:
    """Record what became of a decided dispute's bond."""
    conn.execute(
        "UPDATE dispute_games SET bond_state = ? WHERE dispute_id = ?", (bond_state, dispute_id)
    )


def is_reassigned(conn: sqlite3.Connection, verdict_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM reassigned_verdicts WHERE verdict_id = ?", (verdict_id,)
    ).fetchone()
    return row is not None


def set_aside_verdicts(conn: sqlite3.Connection, run_id: str) -> list[SetAside]:
    """Every verdict of a run set aside for a re-audit, by round and island."""
    rows = conn.execute(
        "SELECT x.round, x.hotkey, x.auditor, x.verdict_id, x.dispute_id, EXISTS (SELECT 1"
        " FROM dispute_games g WHERE g.dispute_id = x.dispute_id AND g.stage = 'recompute')"
        " AS recompute FROM reassigned_verdicts x WHERE x.run_id = ? ORDER BY x.round, x.hotkey",
        (run_id,),
    )
    return [
        SetAside(
            round=r["round"],
            hotkey=r["hotkey"],
            auditor=r["auditor"],
            verdict_id=r["verdict_id"],
            dispute_id=r["dispute_id"],
            recompute=bool(r["recompute"]),
        )
        for r in rows
    ]


def add_inputs(conn: sqlite3.Connection, dispute_id: str, sha256: str, data: bytes) -> None:
    """Store the contested operation's inputs of a game."""
    conn.execute("INSERT INTO dispute_inputs VALUES (?, ?, ?)", (dispute_id, sha256, data))


def inputs(conn: sqlite3.Connection, dispute_id: str) -> bytes | None:
    """The inputs supplied for a game (None: none yet)."""
    row = conn.execute(
        "SELECT data FROM dispute_inputs WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    return None if row is None else bytes(row["data"])


def record_message(
    conn: sqlite3.Connection, dispute_id: str, kind: str, signer: str, body: str, now: int
) -> None:
    seq = conn.execute(
        "SELECT COALESCE(MAX(seq), -1) + 1 FROM dispute_messages WHERE dispute_id = ?",
        (dispute_id,),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO dispute_messages VALUES (?, ?, ?, ?, ?, ?)",
        (dispute_id, seq, kind, signer, body, now),
    )


def load_game(conn: sqlite3.Connection, dispute_id: str) -> Game | None:
    row = conn.execute(
        "SELECT game FROM dispute_games WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    return None if row is None else Game.model_validate_json(row[0])


def undecided(conn: sqlite3.Connection) -> list[Game]:
    return [
        Game.model_validate_json(r[0])
        for r in conn.execute(
            "SELECT game FROM dispute_games WHERE outcome IS NULL ORDER BY dispute_id"
        )
    ]


class DisputeView(BaseModel):
    """What ``GET /v1/disputes/{id}`` answers: the stored record and the game's state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispute_id: str
    run_id: str
    round: int
    verdict_id: str
    hotkey: str
    auditor: str
    bond: int
    opened_beacon_round: int
    decided_beacon_round: int | None
    bytes_in: int
    game: Game


def load_view(conn: sqlite3.Connection, dispute_id: str) -> DisputeView | None:
    row = conn.execute(
        "SELECT dispute_id, run_id, round, verdict_id, hotkey, auditor, bond, opened_beacon_round,"
        " decided_beacon_round, bytes_in, game FROM dispute_games WHERE dispute_id = ?",
        (dispute_id,),
    ).fetchone()
    if row is None:
        return None
    return DisputeView(
        dispute_id=row[0],
        run_id=row[1],
        round=row[2],
        verdict_id=row[3],
        hotkey=row[4],
        auditor=row[5],
        bond=row[6],
        opened_beacon_round=row[7],
        decided_beacon_round=row[8],
        bytes_in=row[9],
        game=Game.model_validate_json(row[10]),
    )


def list_ids(
    conn: sqlite3.Connection, run_id: str, round: int | None = None, stage: str | None = None,
    hotkey: str | None = None,
) -> list[str]:  # fmt: skip
    sql = "SELECT dispute_id FROM dispute_games WHERE run_id = ?"
    args: list[str | int] = [run_id]
    for column, value in (("round", round), ("stage", stage), ("hotkey", hotkey)):
        if value is not None:  # fixed column names: only values are bound
            sql, args = sql + " AND " + column + " = ?", [*args, value]
    return [r[0] for r in conn.execute(sql + " ORDER BY opened_beacon_round, dispute_id", args)]


def games_per_round(conn: sqlite3.Connection, run_id: str) -> dict[int, int]:
    """round -> how many dispute games a run's round has had."""
    rows = conn.execute(
        "SELECT round, COUNT(*) FROM dispute_games WHERE run_id = ? GROUP BY round", (run_id,)
    )
    return {int(r[0]): int(r[1]) for r in rows}


def ruling_signer(conn: sqlite3.Connection, dispute_id: str) -> str | None:
    """The referee whose ruling decided a game (None: no ruling)."""
    row = conn.execute(
        "SELECT signer FROM dispute_messages WHERE dispute_id = ? AND kind = 'ruling'",
        (dispute_id,),
    ).fetchone()
    return None if row is None else str(row[0])


@dataclass(frozen=True, slots=True)
class Outcomes:
    """How many of one party's games, over a span of rounds, overturned or upheld."""

    overturned: int
    upheld: int


_OUTCOMES_SQL: Final = {
    "island": "SELECT COUNT(*) FROM dispute_games WHERE outcome = ? AND hotkey = ?"
    " AND run_id = ? AND round BETWEEN ? AND ?",
    "auditor": "SELECT COUNT(*) FROM dispute_games WHERE outcome = ? AND auditor = ?"
    " AND run_id = ? AND round BETWEEN ? AND ?",
}


def outcomes_in_span(
    conn: sqlite3.Connection,
    run_id: str,
    party: Literal["island", "auditor"],
    hotkey: str,
    span: tuple[int, int],
) -> Outcomes:
    """The decided games of rounds ``span`` (inclusive) in which ``hotkey`` was the
    island or the auditor."""

    def count(outcome: str) -> int:
        bind = (outcome, hotkey, run_id, *span)
        return int(conn.execute(_OUTCOMES_SQL[party], bind).fetchone()[0])

    return Outcomes(overturned=count("overturned"), upheld=count("upheld"))
