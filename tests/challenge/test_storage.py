"""Storage: versioned migrations, idempotent reopen, refusal of a newer schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.challenge import database


def test_migrations_apply_once_and_keep_data(tmp_path: Path) -> None:
    conn = database.connect(tmp_path)
    assert database.schema_version(conn) == len(database.MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute("INSERT INTO beacons VALUES (1, 'aa', 'bb')")
    conn.close()
    again = database.connect(tmp_path)
    assert again.execute("SELECT randomness FROM beacons").fetchone()[0] == "aa"
    again.execute(f"PRAGMA user_version={len(database.MIGRATIONS) + 1}")
    with pytest.raises(RuntimeError, match="newer than this code"):
        database.migrate(again)


def test_failed_transaction_rolls_back(tmp_path: Path) -> None:
    conn = database.connect(tmp_path)
    with pytest.raises(ValueError), database.transaction(conn):
        conn.execute("INSERT INTO beacons VALUES (2, 'aa', 'bb')")
        raise ValueError("boom")
    assert conn.execute("SELECT COUNT(*) FROM beacons").fetchone()[0] == 0


def test_the_legacy_honeypot_reveal_is_copied_then_its_table_dropped(tmp_path: Path) -> None:
    """A database from before version 10 keeps its revealed honeypot list (as period 0)
    and loses the legacy table; a new database never has it."""
    conn = database.reader(tmp_path)  # an empty file, no migration yet
    for version, script in enumerate(database.MIGRATIONS[:9], start=1):
        with database.transaction(conn):
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
    manifest = '{"honeypots": {"reveal_round": 7, "commitment": "c0"}}'
    conn.execute("INSERT INTO runs VALUES ('r', ?, '', '', 0)", (manifest,))
    conn.execute("INSERT INTO honeypot_reveals VALUES ('r', '[\"k\"]', 9)")
    assert database.migrate(conn) == len(database.MIGRATIONS)
    row = conn.execute("SELECT * FROM honeypot_periods").fetchone()
    assert tuple(row) == ("r", 0, 0, 7, "c0", 0, '["k"]', 9)
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'honeypot_reveals'"
    assert conn.execute(tables).fetchall() == []
    assert database.connect(tmp_path / "new").execute(tables).fetchall() == []
