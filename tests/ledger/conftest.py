"""Fixtures for the ledger tests: a fresh ledger file and a few valid hotkeys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.ledger import Ledger
from hypertrain.protocol.identity import ss58_encode


def make_hotkeys(count: int) -> list[str]:
    """Deterministic valid SS58 addresses, sorted so index order is tie-break order."""
    return sorted(ss58_encode(bytes([i % 251 + 1, i // 251]) * 16) for i in range(count))


@pytest.fixture
def hotkeys() -> list[str]:
    return make_hotkeys(6)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.sqlite3") as led:
        yield led
