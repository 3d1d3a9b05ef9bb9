"""Storage of the dispute games: each game's state, its messages and its inputs.

The dispute game's tables (created by schema versions 5 and 7,
:mod:`hypertrain.challenge.migrations`): ``dispute_games`` holds each game's whole state
as JSON (so a restarted service resumes where it stopped), ``dispute_messages`` keeps
every accepted signed message, in order, as received, and ``dispute_inputs`` the
contested operation's inputs. The game itself is the pure state machine
:mod:`hypertrain.dispute.game`; what a decided game implies for its verdict and auditor
is the service's rule (:mod:`.decisions`). Its parts hold the SQL of the other tables of
the disputes resource: verdicts set aside for a re-audit and barred auditors
(:mod:`.reaudit_storage`), late verdicts' own windows (:mod:`.window_storage`). The
functions take the connection explicitly; the caller holds the transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from hypertrain.dispute.model import Game
from hypertrain.dispute.view import DisputeView


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
class UnsettledBond:
    dispute_id: str
    run_id: str
    outcome: str


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


def disputed_verdict(conn: sqlite3.Connection, dispute_id: str) -> str:
    """The id of the verdict a stored game disputes."""
    row = conn.execute(
        "SELECT verdict_id FROM dispute_games WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    return str(row[0])


def is_disputed(conn: sqlite3.Connection, verdict_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM dispute_games WHERE verdict_id = ?", (verdict_id,)).fetchone()
    return row is not None


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


def games_per_round(conn: sqlite3.Connection, run_id: str) -> dict[int, int]:
    """round -> how many dispute games a run's round has had."""
    rows = conn.execute(
        "SELECT round, COUNT(*) FROM dispute_games WHERE run_id = ? GROUP BY round", (run_id,)
    )
    return {int(r[0]): int(r[1]) for r in rows}


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


def ruling_signer(conn: sqlite3.Connection, dispute_id: str) -> str | None:
    """The referee whose ruling decided a game (None: no ruling)."""
    row = conn.execute(
        "SELECT signer FROM dispute_messages WHERE dispute_id = ? AND kind = 'ruling'",
        (dispute_id,),
    ).fetchone()
    return None if row is None else str(row[0])


def add_inputs(conn: sqlite3.Connection, dispute_id: str, sha256: str, data: bytes) -> None:
    """Store the contested operation's inputs of a game."""
    conn.execute("INSERT INTO dispute_inputs VALUES (?, ?, ?)", (dispute_id, sha256, data))


def inputs(conn: sqlite3.Connection, dispute_id: str) -> bytes | None:
    """The inputs supplied for a game (None: none yet)."""
    row = conn.execute(
        "SELECT data FROM dispute_inputs WHERE dispute_id = ?", (dispute_id,)
    ).fetchone()
    return None if row is None else bytes(row["data"])


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
