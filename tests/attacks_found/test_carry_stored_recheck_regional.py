"""``carry_stored`` recheck: the auditor's best-effort store, the island's ``exists`` skip
and the relay's arrival rule, played on real relays (an origin and a regional one).

The rule under review (docs/mechanism.md, docs/threats.md): an auditor that posts a
``match`` under ``carry`` first stores the replayed carried state on the relay, best effort
("a refused store ... costs the island's upload, never a verdict"); an audited island
skips uploading what the relay already holds (``miner.checkpoints.upload_selected`` asks
``relay.exists``); the audit counts a blob only if the relay's arrival record says it
first arrived by the upload deadline (``auditor.uploads.check_arrival``; a blob held
without a record is withheld).

A regional relay stores an upload locally *before* it forwards it upstream
(``relay.service.Relay.put``), keeps the local copy when the forward fails, and answers
``HEAD`` from that local copy (``Relay.size``) while its arrival record is the origin's
(``Relay.arrival``: none when the origin lacks the blob).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fastapi import FastAPI

import tests.relay.conftest as relay_fixtures
from hypertrain.auditor.runner import Auditor
from hypertrain.auditor.uploads import check_arrival
from hypertrain.evidence.errors import IslandInputError
from hypertrain.miner.checkpoints import upload_selected
from hypertrain.relay.app import create_app
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.trainer.checkpoint import encode_checkpoint
from hypertrain.trainer.state import TrainState
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys, make_settings

Serve = Callable[[FastAPI], Running]

# the relay tests' fixtures: fixed keys and relays served on loopback
keys = relay_fixtures.keys
serve = relay_fixtures.serve

ROUND = 3  # the round the island's carried state ends (the auditor matched it)
DEADLINE = 1010  # round ROUND + 1's upload deadline (beacon round)


class Wall:
    """A wall clock the test moves by hand (beacon round = wall + 1)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


class _Service:
    """The challenge service as ``Auditor.store_final`` sees it: a beacon clock."""

    def __init__(self, wall: Wall) -> None:
        self.wall = wall

    def beacon_round(self) -> int:
        return int(self.wall.at) + 1


def _relay(root: Path, keys: Keys, serve: Serve, wall: Wall, **kw: object) -> Running:
    clock = BeaconClock(genesis_unix=0, period_s=1, now=wall)
    return serve(create_app(make_settings(root, keys, **kw), clock=clock))


def _final_state(numel: int) -> TrainState:
    """A final training state (the bytes do not matter, only their address)."""
    tensors = {"w": torch.rand(numel)}
    return TrainState(ROUND * 10, tensors, b"\x00" * 32)


def _store_final(relay: RelayClient, wall: Wall, state: TrainState) -> bool:
    """The real ``Auditor.store_carried`` (it reads only the relay, the service's clock
    and the expiry margin of its auditor), of ``state``'s bytes (only their address
    matters here)."""
    auditor = SimpleNamespace(relay=relay, service=_Service(wall), expiry_margin=50)
    assignment = SimpleNamespace(round=ROUND, hotkey="island")
    data = encode_checkpoint(state)
    return Auditor.store_carried(auditor, assignment, data)  # type: ignore[arg-type]


def _island_dir(tmp_path: Path, data: bytes) -> Path:
    previous = tmp_path / "island" / f"round-{ROUND}"
    previous.mkdir(parents=True)
    (previous / "ckpt_4.bin").write_bytes(data)
    return previous / "ckpt_4.bin"


def test_a_store_only_a_regional_relay_kept_makes_an_honest_island_skip_and_fail(
    tmp_path: Path, keys: Keys, serve: Serve
) -> None:
    """Found by an attacker review, fixed. The auditor (``keys.other``) and the island
    (``keys.miner``) use the same regional relay. The auditor's upstream quota is spent
    (it stored other islands' states at the origin in this window: docs/auditor.md counts
    one state per matched island against it), so the origin refuses the forward of its
    store; the
    region keeps the local copy and ``store_final`` returns False, "best effort". The
    honest island then asks the region ``exists`` for its carried state, is told it is
    held (the region's local copy) and uploads nothing. Its audit reads the origin's
    arrival record: none (the origin never received it), so ``check_arrival`` calls the
    honest island's carried state withheld (``unverifiable``), and an auditor on the
    origin does not find it at all. A refused store cost a verdict, not bytes. Now a client
    skips an upload only when the origin holds the blob with an arrival record
    (``RelayClient.held_at_origin``: what an audit counts), so the island uploads it again
    and the region forwards it.

    Safe behaviour asserted: after the island's ``upload_selected`` the origin holds
    the carried state and its arrival record counts it by the deadline."""
    wall = Wall(1000.0)  # beacon round 1001
    origin = _relay(tmp_path / "origin", keys, serve, wall)
    region = _relay(tmp_path / "region", keys, serve, wall, upstream=origin.url)
    # the auditor's window at the origin: 3.5 of its 6 MiB already spent on other stores
    with RelayClient(origin.url, keys.other, RUN_ID) as direct:
        direct.put(os.urandom(3_500_000), kind="checkpoint", round=ROUND, expiry_round=1050)
    state = _final_state(750_000)  # 3 MB: the region accepts it, the origin refuses
    data = encode_checkpoint(state)
    with RelayClient(region.url, keys.other, RUN_ID, attempts=1) as auditor_relay:
        assert _store_final(auditor_relay, wall, state) is False  # "best effort"
    carried = _island_dir(tmp_path, data)

    wall.at = 1004.0  # round ROUND + 1's selection: the island uploads what it owes
    with RelayClient(region.url, keys.miner, RUN_ID) as island_relay:
        upload_selected(island_relay, tmp_path / "island", ROUND + 1, [], 1050, carried)

    wall.at = 1012.0  # past the upload deadline: the audit of round ROUND + 1
    sha = hashlib.sha256(data).hexdigest()
    with RelayClient(origin.url, None, RUN_ID) as at_origin:
        assert at_origin.exists(sha) == len(data), "the origin never got the carried state"
    with RelayClient(region.url, None, RUN_ID) as auditor_view:
        check_arrival(auditor_view, sha, DEADLINE)  # raises now: "without an arrival record"


def test_a_state_the_auditor_stored_before_the_island_looked_counts_for_the_island(
    tmp_path: Path, keys: Keys, serve: Serve
) -> None:
    """Defence that holds. The auditor stores the carried state at round 1001; the island
    asks at round 1005, finds it held and skips; the audit past the deadline (round 1013)
    reads the first arrival (1001 <= 1010) and counts it. A blob the island saw held
    before it had to act always arrived before the deadline it had to meet."""
    wall = Wall(1000.0)
    origin = _relay(tmp_path / "origin", keys, serve, wall)
    state = _final_state(200_000)
    data = encode_checkpoint(state)
    with RelayClient(origin.url, keys.other, RUN_ID) as auditor_relay:
        assert _store_final(auditor_relay, wall, state) is True
    carried = _island_dir(tmp_path, data)
    wall.at = 1004.0
    with RelayClient(origin.url, keys.miner, RUN_ID) as island_relay:
        sent = upload_selected(island_relay, tmp_path / "island", ROUND + 1, [], 1050, carried)
    assert sent == 0
    wall.at = 1012.0
    with RelayClient(origin.url, None, RUN_ID) as auditor_view:
        sha = hashlib.sha256(data).hexdigest()
        check_arrival(auditor_view, sha, DEADLINE)
        assert auditor_view.arrival_round(sha) == 1001


def test_a_late_store_neither_rescues_a_withholder_nor_moves_an_honest_upload(
    tmp_path: Path, keys: Keys, serve: Serve
) -> None:
    """Defence that holds. (1) The island uploaded its carried state itself at round
    1005 (the store had not happened yet); the auditor's store arrives at round 1021,
    past the deadline: the first arrival (1005) stands and the audit counts it.
    (2) A withholding island whose carried state only the auditor's late store (round
    1021) put on the relay: the arrival is past the deadline, so it stays withheld."""
    wall = Wall(1004.0)
    origin = _relay(tmp_path / "origin", keys, serve, wall)
    honest, cheat = _final_state(100_000), _final_state(100_000)
    honest_data = encode_checkpoint(honest)
    carried = _island_dir(tmp_path, honest_data)
    with RelayClient(origin.url, keys.miner, RUN_ID) as island_relay:
        sent = upload_selected(island_relay, tmp_path / "island", ROUND + 1, [], 1050, carried)
    assert sent == len(honest_data)
    wall.at = 1020.0  # a slow auditor (a re-audit) stores both states late
    with RelayClient(origin.url, keys.other, RUN_ID) as auditor_relay:
        assert _store_final(auditor_relay, wall, honest) is True
        assert _store_final(auditor_relay, wall, cheat) is True
    with RelayClient(origin.url, None, RUN_ID) as auditor_view:
        check_arrival(auditor_view, hashlib.sha256(honest_data).hexdigest(), DEADLINE)
        cheat_sha = hashlib.sha256(encode_checkpoint(cheat)).hexdigest()
        with pytest.raises(IslandInputError, match="after the upload deadline"):
            check_arrival(auditor_view, cheat_sha, DEADLINE)
