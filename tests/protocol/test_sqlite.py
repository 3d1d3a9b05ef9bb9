from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.protocol.sqlite import open_database, transaction


def test_wal_and_pragmas(tmp_path: Path) -> None:
    conn = open_database(tmp_path / "db.sqlite", synchronous="FULL", foreign_keys=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    memory = open_database(":memory:")
    assert memory.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_transaction_commits_or_rolls_back(tmp_path: Path) -> None:
    conn = open_database(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE t (x INTEGER)")
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("boom")
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
