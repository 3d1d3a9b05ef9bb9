"""One relay serves several runs and competitions, and names them when it refuses one."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from pathlib import Path

import httpx
from fastapi import FastAPI

from hypertrain.relay.app import create_app
from hypertrain.relay.auth import encode_authorization
from hypertrain.relay.cli import register, settings_from_args
from hypertrain.relay.clock import BeaconClock
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys, blob_envelope, make_settings


def _put(
    http: httpx.Client, relay: Running, keys: Keys, data: bytes, run_id: str
) -> httpx.Response:
    auth = encode_authorization(blob_envelope(keys.miner, data, run_id=run_id))
    sha = hashlib.sha256(data).hexdigest()
    return http.put(f"{relay.url}/blobs/{sha}", content=data, headers={"authorization": auth})


def test_a_relay_serves_a_run_and_a_competition_and_refuses_others(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Callable[[FastAPI], Running]
) -> None:
    settings = make_settings(tmp_path / "relay", keys, run_ids=frozenset({"comp-1"}))
    relay = serve(create_app(settings, clock=clock))
    with httpx.Client(timeout=10) as http:
        assert _put(http, relay, keys, b"a run's blob", RUN_ID).status_code == 201
        assert _put(http, relay, keys, b"a competition's file", "comp-1").status_code == 201
        refused = _put(http, relay, keys, b"another run", "run-9")
        assert (refused.status_code, refused.json()["error"]) == (403, "wrong_run")
        assert "comp-1" in refused.json()["detail"] and "--run-id" in refused.json()["detail"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser


def test_run_id_repeats_on_the_command_line(tmp_path: Path) -> None:
    args = _parser().parse_args(
        ["relay", "serve", "--storage", str(tmp_path), "--run-id", "local", "--run-id", "comp-1"]
    )
    assert settings_from_args(args).served_runs == {"local", "comp-1"}
    bare = _parser().parse_args(["relay", "serve", "--storage", str(tmp_path)])
    assert settings_from_args(bare).served_runs == frozenset()
