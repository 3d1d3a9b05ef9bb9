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
