from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.protocol.sqlite import open_database, transaction, write_generation


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


def test_the_write_generation_moves_with_every_write(tmp_path: Path) -> None:
    conn = open_database(tmp_path / "db.sqlite")
    other = open_database(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE t (x INTEGER)")
    start = write_generation(conn)
    assert start is not None and write_generation(conn) == start  # reads change nothing
    conn.execute("SELECT * FROM t").fetchall()
    assert write_generation(conn) == start
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        assert write_generation(conn) is None  # uncommitted rows are no generation
    own = write_generation(conn)
    assert own is not None and own != start
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError
    rolled_back = write_generation(conn)
    assert rolled_back not in (None, own)  # a rollback moves it too (never backwards)
    other.execute("INSERT INTO t VALUES (3)")  # another connection's commit
    assert write_generation(conn) not in (None, rolled_back)
