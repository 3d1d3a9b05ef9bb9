"""Upload accounting, the beacon clock and settings validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.errors import QuotaError
from hypertrain.relay.quota import QuotaBook
from hypertrain.relay.settings import RelaySettings


def test_quota_counts_each_blob_once_and_persists(tmp_path: Path) -> None:
    book = QuotaBook(tmp_path / "q.sqlite")
    assert book.reserve("alice", 1, "a" * 64, 60, limit=100) is True
    assert book.reserve("alice", 1, "a" * 64, 60, limit=100) is False  # idempotent
    with pytest.raises(QuotaError) as info:
        book.reserve("alice", 1, "b" * 64, 41, limit=100)
    assert (info.value.reason, info.value.status) == ("round_quota_exceeded", 413)
    assert book.reserve("alice", 2, "b" * 64, 41, limit=100)  # another round
    assert book.reserve("bob", 1, "b" * 64, 41, limit=100)  # another hotkey
    book.release("alice", 1, "a" * 64)
    assert book.used("alice", 1) == 0
    book.reserve("alice", 1, "c" * 64, 70, limit=100)
    book.close()
    reopened = QuotaBook(tmp_path / "q.sqlite")
    assert reopened.used("alice", 1) == 70
    reopened.close()


def test_beacon_clock() -> None:
    assert BeaconClock(genesis_unix=100, period_s=3, now=lambda: 99.0).current_round() == 0
    assert BeaconClock(genesis_unix=100, period_s=3, now=lambda: 100.0).current_round() == 1
    assert BeaconClock(genesis_unix=100, period_s=3, now=lambda: 105.9).current_round() == 2
    assert BeaconClock().current_round() > 10_000_000  # quicknet, today
    with pytest.raises(ValueError):
        BeaconClock(period_s=0)


def test_settings_refuse_bad_values(tmp_path: Path) -> None:
    base = {"storage": str(tmp_path), "state_dir": tmp_path / "s"}
    RelaySettings(**base)
    for bad in (
        {"unknown_key": 1},
        {"max_blob_bytes": 0},
        {"upstream": "ftp://x"},
        {"allow_list": tmp_path / "a.json", "metagraph_url": "http://m/v1/metagraph/latest"},
    ):
        with pytest.raises(ValidationError):
            RelaySettings(**base, **bad)
