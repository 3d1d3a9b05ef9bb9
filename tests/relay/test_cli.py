"""``hypertrain relay``: flag parsing and put/get against a running relay."""

from __future__ import annotations

import argparse
import hashlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hypertrain.cli import build_parser, main
from hypertrain.protocol.identity import write_key_file
from hypertrain.relay.cli import settings_from_args
from tests.relay.conftest import Running
from tests.relay.helpers import NOW_ROUND, RUN_ID


def _serve_args(*flags: str) -> argparse.Namespace:
    return build_parser("relay").parse_args(["relay", "serve", *flags])


def test_serve_flags_to_settings(tmp_path: Path) -> None:
    coordinator = "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"
    args = _serve_args(
        "--storage", str(tmp_path / "b"), "--coordinator", coordinator,
        "--upstream", "http://up:1", "--beacon-period-s", "1", "--max-blob-bytes", "10",
    )  # fmt: skip
    settings = settings_from_args(args)
    assert settings.state_dir == tmp_path / "b" / "state"
    assert settings.upstream == "http://up:1" and settings.max_blob_bytes == 10
    assert settings.beacon_period_s == 1 and len(settings.coordinators) == 1
    with pytest.raises(ValueError, match="state-dir"):
        settings_from_args(_serve_args("--storage", "s3://bucket/prefix"))


def test_put_and_get_commands(
    relay: Running, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_key_file(bytes([1]) * 32, tmp_path / "hotkey")  # the allow-listed miner key
    src = tmp_path / "blob.bin"
    src.write_bytes(b"cli bytes" * 100)
    key_file = str(tmp_path / "hotkey")
    code = main([
        "relay", "put", str(src), "--relay-url", relay.url, "--run-id", RUN_ID, "--round", "3",
        "--kind", "update", "--expiry-round", str(NOW_ROUND + 5), "--key-file", key_file,
    ])  # fmt: skip
    sha = capsys.readouterr().out.strip()
    assert code == 0 and sha == hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "copy.bin"
    assert main(["relay", "get", sha, "--relay-url", relay.url, "--out", str(out)]) == 0
    assert out.read_bytes() == src.read_bytes()
    assert main(["relay", "get", "0" * 64, "--relay-url", relay.url, "--out", str(out)]) == 1
    assert "not_found" in capsys.readouterr().err


def test_serve_runs_as_a_process(tmp_path: Path) -> None:
    sock = socket.socket()  # bound here and handed over: no port race with other processes
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = int(sock.getsockname()[1])
    (tmp_path / "allow.json").write_text("[]")
    cmd = [
        sys.executable, "-m", "hypertrain.cli", "relay", "serve", "--fd", str(sock.fileno()),
        "--storage", str(tmp_path / "blobs"), "--allow-list", str(tmp_path / "allow.json"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(sock.fileno(),)
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert resp.json()["ok"] is True
        assert httpx.head(f"http://127.0.0.1:{port}/blobs/{'0' * 64}").status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        sock.close()
