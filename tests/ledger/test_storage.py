"""Storage: WAL, versioned migrations that only move forward, refusal of foreign files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hypertrain.ledger import SCHEMA_VERSION, Ledger, LedgerStorageError
from hypertrain.ledger import settle as settle_module
from hypertrain.ledger.storage import MIGRATIONS, migrate, schema_version


def test_new_file_is_at_the_latest_version(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as led:
        assert schema_version(led._conn) == SCHEMA_VERSION == len(MIGRATIONS)


def test_old_version_is_upgraded_in_place(tmp_path: Path, hotkeys: list[str]) -> None:
    path = tmp_path / "l.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == 1
    conn.close()
    with Ledger(path) as led:  # opening applies the missing steps, keeping the data
        assert schema_version(led._conn) == SCHEMA_VERSION
        indexes = {r[0] for r in led._conn.execute("SELECT name FROM sqlite_master")}
        assert "escrows_open" in indexes
        led.create_run("r1", 10, 1)
        led.settle_round("r1", 0, {hotkeys[0]: 1}, epoch=0)
        assert led.verify().ok


def test_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    Ledger(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.close()
    with pytest.raises(LedgerStorageError, match="newer than this code"):
        Ledger(path)


def test_non_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    path.write_bytes(b"this is not a database, just some bytes" * 100)
    with pytest.raises(LedgerStorageError, match="not a usable ledger"):
        Ledger(path)


def test_failed_operation_leaves_nothing_behind(
    ledger: Ledger, hotkeys: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.create_run("r1", 10, 1)
    head = ledger.summary("r1").head_hash

    def explode(*args: object) -> None:
        raise RuntimeError("crash after the escrow entries were written")

    monkeypatch.setattr(settle_module, "vest", explode)
    with pytest.raises(RuntimeError):
        ledger.settle_round("r1", 0, {hotkeys[0]: 1, hotkeys[1]: 3}, epoch=0)
    summary = ledger.summary("r1")
    assert (summary.head_hash, summary.rounds_settled, summary.minted) == (head, 0, 0)
    monkeypatch.undo()
    assert ledger.settle_round("r1", 0, {hotkeys[0]: 1, hotkeys[1]: 3}, epoch=0).applied
    assert ledger.verify().ok
