from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from hypertrain.beacon.chain import load_chain_info
from hypertrain.beacon.client import BeaconClient
from hypertrain.beacon.errors import FutureRoundError, LocalKeyError, RoundNotAvailableError
from hypertrain.beacon.launch import start_local_beacon
from hypertrain.beacon.local import LocalBeacon, local_chain
from hypertrain.beacon.server import LocalBeaconServer, route
from hypertrain.beacon.verify import verify_beacon

GENESIS = 1_700_000_000
KEY = b"\x00" * 31 + b"\x05"


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_beacon(clock: FakeClock, period_s: int = 2) -> LocalBeacon:
    return LocalBeacon(KEY, local_chain(KEY, period_s, GENESIS, "test"), clock=clock)


def test_never_signs_a_round_before_its_time() -> None:
    clock = FakeClock(GENESIS - 1)
    beacon = make_beacon(clock)
    with pytest.raises(RoundNotAvailableError):
        beacon.latest()
    with pytest.raises(FutureRoundError):
        beacon.beacon(1)
    clock.now = GENESIS + 5.9  # rounds 1, 2, 3 are due at +0, +2, +4
    assert beacon.latest().round == 3
    with pytest.raises(FutureRoundError):
        beacon.beacon(4)
    b = beacon.beacon(2)
    assert verify_beacon(beacon.chain, 2, b.signature) == b.randomness


def test_routes_match_drand() -> None:
    clock = FakeClock(GENESIS + 10)
    beacon = make_beacon(clock)
    h = beacon.chain.chain_hash_hex
    for prefix in ("", f"/{h}"):
        assert route(beacon, f"{prefix}/info") == (200, beacon.chain.to_json())
        status, doc = route(beacon, f"{prefix}/public/latest")
        assert status == 200 and doc["round"] == 6
        assert route(beacon, f"{prefix}/public/6") == (200, doc)
        assert route(beacon, f"{prefix}/public/7")[0] == 425
        assert route(beacon, f"{prefix}/public/0")[0] == 404
    assert route(beacon, "/chains") == (200, [h])
    assert route(beacon, f"/{'0' * 64}/info")[0] == 404
    assert route(beacon, "/public/-1")[0] == 404
    assert route(beacon, "/nope")[0] == 404


def test_client_verifies_local_beacon_on_loopback() -> None:
    clock = FakeClock(GENESIS + 100)
    beacon = make_beacon(clock)
    with LocalBeaconServer(beacon) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with BeaconClient([server.url], beacon.chain, clock=clock, retries=0) as client:
            assert client.info() == beacon.chain
            latest = client.latest()
            assert latest.round == 51
            assert client.get(10) == beacon.beacon(10)
            with pytest.raises(FutureRoundError):
                client.get(60)
            clock.now += 10  # rounds 52..56 become due
            assert client.wait_for(56, timeout_s=5).round == 56
        response = httpx.get(f"{server.url}/public/57", timeout=2)
        assert response.status_code == 425


def test_open_creates_key_and_keeps_the_chain(tmp_path: Path) -> None:
    key_file = tmp_path / "key.json"
    first = LocalBeacon.open(key_file, tmp_path / "state", period_s=1, clock=FakeClock(GENESIS))
    assert key_file.stat().st_mode & 0o777 == 0o600
    later = LocalBeacon.open(
        key_file, tmp_path / "state", period_s=1, clock=FakeClock(GENESIS + 99)
    )
    assert later.chain == first.chain
    assert load_chain_info(tmp_path / "state" / "chain_info.json") == first.chain
    with pytest.raises(LocalKeyError, match="another chain"):
        LocalBeacon.open(key_file, tmp_path / "state", period_s=2)


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps({"scheme": "x", "secret_key": "00" * 31 + "01"}), json.dumps({})],
)
def test_bad_key_files(tmp_path: Path, content: str) -> None:
    key_file = tmp_path / "key.json"
    key_file.write_text(content)
    with pytest.raises(LocalKeyError):
        LocalBeacon.open(key_file, tmp_path / "state")


def test_key_must_match_chain() -> None:
    other = local_chain(b"\x00" * 31 + b"\x06", 1, GENESIS, "test")
    with pytest.raises(LocalKeyError):
        LocalBeacon(KEY, other)


def test_serve_subprocess_ticks_and_verifies(tmp_path: Path) -> None:
    with start_local_beacon(tmp_path / "beacon", period_s=1) as proc:
        assert proc.chain == load_chain_info(tmp_path / "beacon" / "info.json")
        with BeaconClient([proc.url], proc.chain, retries=1, backoff_s=0.1) as client:
            first = client.latest()
            after = client.wait_for(first.round + 1, timeout_s=10)
            assert after.round == first.round + 1
            assert verify_beacon(proc.chain, after.round, after.signature) == after.randomness
    assert proc.process.poll() is not None
