"""Storage of a round's signed commits (a part of the rounds storage).

The intake decides whether a commit is accepted; this module stores it and reads the
commits back as the typed rows the settlement rule takes
(:class:`~hypertrain.challenge.rule.CommitRow`) and those the views, the
dashboard and the clock read (tokens, envelopes, order of arrival, bytes).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass

from hypertrain.challenge.rule import CommitRow
from hypertrain.protocol.messages import Commit


@dataclass(frozen=True, slots=True)
class NewCommit:
    """A signed commit as it is stored (body and envelope as canonical text)."""

    run_id: str
    round: int
    hotkey: str
    tokens: int
    update_bytes: int
    train_loss: float | None
    body: str
    envelope: str
    accepted_beacon_round: int


@dataclass(frozen=True, slots=True)
class CommitTokens:
    round: int
    hotkey: str
    tokens: int
    train_loss: float | None


def add_commit(conn: sqlite3.Connection, new: NewCommit) -> None:
    """Store a commit (``sqlite3.IntegrityError`` when the island already committed)."""
    conn.execute(
        "INSERT INTO commits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.round,
            new.hotkey,
            new.tokens,
            new.update_bytes,
            new.train_loss,
            new.body,
            new.envelope,
            new.accepted_beacon_round,
        ),
    )


def has_commit(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> bool:
    """Whether the island committed to round ``index``."""
    row = conn.execute(
        "SELECT 1 FROM commits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return row is not None


def served_rounds(conn: sqlite3.Connection, run_id: str, hotkey: str, before: int) -> int:
    """How many rounds before ``before`` the island committed to."""
    (served,) = conn.execute(
        "SELECT COUNT(*) FROM commits WHERE run_id = ? AND hotkey = ? AND round < ?",
        (run_id, hotkey, before),
    ).fetchone()
    return int(served)


def round_commits(conn: sqlite3.Connection, run_id: str, index: int) -> list[CommitRow]:
    """Each commit of a round: its island and committed tokens, in the order stored."""
    rows = conn.execute(
        "SELECT hotkey, tokens FROM commits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return [CommitRow(r["hotkey"], int(r["tokens"])) for r in rows]


def run_commits(conn: sqlite3.Connection, run_id: str) -> dict[int, list[CommitRow]]:
    """round -> its commits (island, tokens) in the order stored, for every round."""
    out: dict[int, list[CommitRow]] = defaultdict(list)
    for r in conn.execute("SELECT round, hotkey, tokens FROM commits WHERE run_id = ?", (run_id,)):
        out[int(r["round"])].append(CommitRow(r["hotkey"], int(r["tokens"])))
    return dict(out)


def shared_commitments(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The islands whose commit of the round names the same update or the same checkpoint
    root as another island's commit of it (an exact copy, or the copied one)."""
    holders: dict[tuple[str, str], set[str]] = defaultdict(set)
    rows = conn.execute(
        "SELECT hotkey, body FROM commits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    for r in rows:
        body = Commit.model_validate_json(r["body"])
        holders[("update", body.update_sha256)].add(r["hotkey"])
        holders[("root", body.checkpoint_root)].add(r["hotkey"])
    return frozenset(h for group in holders.values() if len(group) > 1 for h in group)


def committers(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The islands that committed to a round."""
    rows = conn.execute(
        "SELECT hotkey FROM commits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return frozenset(r["hotkey"] for r in rows)


def commit_tokens(conn: sqlite3.Connection, run_id: str) -> list[CommitTokens]:
    """Every commit's round, island, tokens and self-reported loss, by round."""
    rows = conn.execute(
        "SELECT round, hotkey, tokens, train_loss FROM commits WHERE run_id = ? ORDER BY round",
        (run_id,),
    )
    return [CommitTokens(r["round"], r["hotkey"], r["tokens"], r["train_loss"]) for r in rows]


def commit_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    rows = conn.execute(
        "SELECT envelope FROM commits WHERE run_id = ? AND round = ? ORDER BY hotkey",
        (run_id, index),
    )
    return [r["envelope"] for r in rows]


def commit_order(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    """The committing hotkeys in the order the service accepted them."""
    rows = conn.execute(
        "SELECT hotkey FROM commits WHERE run_id = ? AND round = ? ORDER BY rowid",
        (run_id, index),
    )
    return [r["hotkey"] for r in rows]


def commit_bytes(conn: sqlite3.Connection, run_id: str, index: int) -> int:
    """The bytes of a round's signed commits as stored."""
    row = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(envelope)), 0) AS n FROM commits"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    return int(row["n"])


def commit_progress(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[int, int | None]:
    """(commits accepted, beacon round of the last one) of a round."""
    row = conn.execute(
        "SELECT COUNT(*) AS n, MAX(accepted_beacon_round) AS last FROM commits"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    return int(row["n"]), None if row["last"] is None else int(row["last"])


def has_commits(conn: sqlite3.Connection, run_id: str, index: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM commits WHERE run_id = ? AND round = ? LIMIT 1", (run_id, index)
    ).fetchone()
    return row is not None


def commit_body(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> str | None:
    """An island's commit body (JSON) of a round (None: it did not commit)."""
    row = conn.execute(
        "SELECT body FROM commits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return None if row is None else str(row["body"])


def accepted_rounds(conn: sqlite3.Connection, run_id: str) -> dict[int, dict[str, int]]:
    """round -> island -> the beacon round its commit was accepted at (the dashboard's
    utilisation: the service's own clock, not the island's word)."""
    rows = conn.execute(
        "SELECT round, hotkey, accepted_beacon_round FROM commits WHERE run_id = ?", (run_id,)
    )
    out: dict[int, dict[str, int]] = defaultdict(dict)
    for r in rows:
        out[int(r["round"])][str(r["hotkey"])] = int(r["accepted_beacon_round"])
    return dict(out)
