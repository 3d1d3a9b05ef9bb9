"""Errors that say what to do: each refusal is one line, names what to change, exits 1.

A port that something else holds ends every server before it writes state; ``challenge
status`` is "up" only for the service it was asked about; the auditor and evaluator
check their credentials before any work; a device that is not there, a host that does
not answer and a wallet in btcli's spelling are each handled at the command line. A
one-shot command fails at once on a peer that is down; a long-lived one (``--follow``)
waits for it and goes on once it appears.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.cli import build_parser, main
from hypertrain.protocol.keyargs import key_from_args
from tests.challenge.helpers import manifest_doc
from tests.ops.conftest import LiveService


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another process (here: a plain socket) listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_server_refuses_a_taken_port_before_creating_state(
    held_port: int,
    tmp_path: Path,
    small_dataset: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHALLENGE_STATE_DIR", str(tmp_path / "service"))
    port = str(held_port)
    commands = {
        "service": ["challenge", "serve", "--port", port],
        "relay": ["relay", "serve", "--port", port, "--storage", str(tmp_path / "relay"),
                  "--run-id", "r"],
        "beacon": ["beacon", "serve", "--port", port, "--key-file", str(tmp_path / "beacon" / "k"),
                   "--state-dir", str(tmp_path / "beacon")],
        "data": ["data", "serve", "--port", port, "--dataset-dir", str(small_dataset)],
    }  # fmt: skip
    for name, argv in commands.items():
        code, _, err = _run(capsys, *argv)
        assert code == 1, (name, err)
        assert f"port {held_port} on 127.0.0.1 is already in use" in err, (name, err)
        assert err.count("\n") == 1 and "Errno" not in err, (name, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused server wrote state"


class _AnyJson(http.server.BaseHTTPRequestHandler):
    """Something else on the port: answers ``{"ok": true}`` to every path."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_status_is_not_fooled_by_whatever_holds_the_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnyJson)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, out, err = _run(capsys, "challenge", "status", "--service-url", url)
        assert code == 1 and "is up" not in out and "/version" in err, out + err
    finally:
        server.shutdown()
        server.server_close()


def test_status_with_a_ready_file_checks_the_serving_process(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Up only when the process that wrote the ready file is alive and bound that port."""
    ready = tmp_path / "ready.json"
    status = ["challenge", "status", "--service-url", live_service.url, "--ready-file", str(ready)]
    code, _, err = _run(capsys, *status)
    assert code == 1 and "was not written" in err and "port taken" in err, err
    dead = subprocess.run(["true"], check=True)  # a pid that has exited
    gone = subprocess.Popen(["true"])
    gone.wait()
    ready.write_text(json.dumps({"pid": gone.pid, "url": live_service.url}))
    code, _, err = _run(capsys, *status)
    assert dead.returncode == 0 and code == 1, err
    assert f"(pid {gone.pid}) is not running" in err and "another process" in err, err
    ready.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:1"}))
    code, _, err = _run(capsys, *status)
    assert code == 1 and "not " + live_service.url in err, err
    ready.write_text(json.dumps({"pid": os.getpid(), "url": live_service.url}))
    code, out, err = _run(capsys, *status)
    assert code == 0 and "is up" in out, err


def _create_run(svc: LiveService, tmp_path: Path, **fields: Any) -> None:
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps({**manifest_doc(), **fields}))
    argv = [
        "challenge",
        "create-run",
        "--service-url",
        svc.url,
        "--admin-token-file",
        str(svc.admin_token),
    ]
    assert main([*argv, "--manifest", str(manifest)]) == 0


def _auditor(svc_url: str, relay: str, token: Path, key: Path, *extra: str) -> list[str]:
    return [
        "auditor", "run", "--service-url", svc_url, "--relay-url", relay, "--run-id", "run-1",
        "--key-file", str(key), "--worker-token-file", str(token),
        "--dataset-dir", "unused", "--round", "0", *extra,
    ]  # fmt: skip


def _new_key(tmp_path: Path, name: str = "auditor") -> Path:
    wallets = tmp_path / "wallets"
    assert (
        main(["keys", "new", "--wallet-dir", str(wallets), "--wallet", "w", "--hotkey", name]) == 0
    )
    return wallets / "w" / "hotkeys" / name


def test_the_auditor_checks_its_credentials_before_any_work(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _create_run(live_service, tmp_path)
    key = _new_key(tmp_path)
    wrong = tmp_path / "wrong.token"
    wrong.write_text("f" * 64)
    relay = f"http://127.0.0.1:{_closed_port()}"
    capsys.readouterr()
    code, out, err = _run(capsys, *_auditor(live_service.url, relay, wrong, key))
    assert code == 1 and "refused the worker token (401)" in err, err
    assert "CHALLENGE_WORKER_TOKEN_FILE" in err and '"started"' not in out
    right = live_service.admin_token.parent / "worker.token"
    code, out, err = _run(capsys, *_auditor(live_service.url, relay, right, key))
    assert code == 1 and f"cannot reach the relay at {relay.removeprefix('http://')}" in err, err
    down = f"http://127.0.0.1:{_closed_port()}"
    code, _, err = _run(capsys, *_auditor(down, relay, right, key))
    assert code == 1 and down in err and err.count("\n") == 1, err


def test_a_missing_device_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = _new_key(tmp_path)
    token = tmp_path / "worker.token"
    token.write_text("a" * 64)
    down = f"http://127.0.0.1:{_closed_port()}"
    capsys.readouterr()
    for device, expected in (("cuda:64", "--device cuda:64: "), ("gpu", "is not a torch device")):
        code, _, err = _run(capsys, *_auditor(down, down, token, key, "--device", device))
        assert code == 1 and expected in err and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_an_unreachable_service_is_named_by_its_host() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with ChallengeClient(url) as client, pytest.raises(ServiceError) as caught:
        client.rounds("run-1")
    assert url in str(caught.value) and caught.value.status == 0


def test_btcli_wallet_flags_name_the_same_key(tmp_path: Path) -> None:
    key = _new_key(tmp_path, "h1")
    wallets = str(tmp_path / "wallets")
    common = ["--service-url", "s", "--relay-url", "r", "--run-id", "x", "--worker-token-file", "t",
              "--dataset-dir", "d", "--follow"]  # fmt: skip
    spellings = (
        ["--wallet.name", "w", "--wallet.hotkey", "h1", "--wallet.path", wallets],
        ["--wallet", "w", "--hotkey", "h1", "--wallet-path", wallets],
        ["--key-file", str(key)],
    )
    loaded = set()
    for flags in spellings:
        args = build_parser("auditor").parse_args(["auditor", "run", *common, *flags])
        loaded.add(key_from_args(args).ss58_address)
    assert len(loaded) == 1
    both = build_parser("auditor").parse_args(
        ["auditor", "run", *common, "--key-file", str(key), "--wallet.name", "w"]
    )
    with pytest.raises(ValueError, match="either --key-file or the wallet flags"):
        key_from_args(both)
    missing = build_parser("auditor").parse_args(
        ["auditor", "run", *common, "--wallet.name", "nope", "--wallet.path", wallets]
    )
    with pytest.raises(ValueError, match="btcli wallet new_hotkey"):
        key_from_args(missing)


def test_watch_follow_waits_for_a_service_that_goes_away(
    live_service: LiveService, tmp_path: Path
) -> None:
    """Like ``run --follow``: a refused connection is reported and retried, never fatal."""
    _create_run(live_service, tmp_path)
    key = _new_key(tmp_path, "island")
    watch = subprocess.Popen(
        [sys.executable, "-m", "hypertrain.miner.cli", "watch", "--follow",
         "--service-url", live_service.url, "--relay-url", f"http://127.0.0.1:{_closed_port()}",
         "--run-id", "run-1", "--key-file", str(key), "--dataset-dir", str(tmp_path / "none"),
         "--state-dir", str(tmp_path / "island")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert watch.stdout is not None
        started = json.loads(watch.stdout.readline() or "{}")
        assert started.get("event") == "started", watch.stderr.read() if watch.stderr else ""
        live_service.stop()
        for _ in range(2):  # reported at every poll while the service is away, never fatal
            event = json.loads(watch.stdout.readline() or "{}")
            assert event.get("event") == "service_unreachable", event
            assert live_service.url.removeprefix("http://") in event["reason"], event
        assert watch.poll() is None
    finally:
        watch.kill()
        watch.wait(timeout=30)


@functools.cache
def _host_record() -> Any:
    """This host's determinism record as a role's process sets it (a run it can follow)."""
    code = ("from hypertrain.trainer.determinism import configure_determinism as c;"
            " print(c(1, 'cpu', 'float32').model_dump_json())")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


class Events:
    """A role's JSON event lines, read in a thread so that every wait has a deadline."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def until(self, event: str, deadline_s: float = 180.0) -> dict[str, Any]:
        """The next ``event`` line; fails at the deadline, or when the role exits first."""
        deadline = time.monotonic() + deadline_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.seen}"
                continue
            self.seen.append(line)
            doc = json.loads(line) if line.startswith("{") else {}
            if doc.get("event") == event:
                return dict(doc)
        raise AssertionError(f"no {event!r} within {deadline_s} s: {self.seen[-20:]}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


class LateRelay:
    """A relay address that refuses connections until :meth:`start` (a health answer)."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnyJson,
                                                      bind_and_activate=False)  # fmt: skip
        self.server.server_bind()  # bound, not listening: a connection is refused
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.serving = False

    def start(self) -> None:
        self.server.server_activate()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.serving = True

    def close(self) -> None:
        if self.serving:
            self.server.shutdown()
        self.server.server_close()


def test_auditor_follow_waits_for_a_service_and_a_relay_that_start_late(
    live_service: LiveService, tmp_path: Path
) -> None:
    """``--round W`` fails at once (above); ``--follow`` waits for each peer, then starts."""
    _create_run(live_service, tmp_path, determinism=_host_record())
    key = _new_key(tmp_path)
    token = live_service.admin_token.parent / "worker.token"
    live_service.stop()
    relay = LateRelay()
    argv = [*_auditor(live_service.url, relay.url, token, key)[:-2], "--follow"]
    auditor = Events([sys.executable, "-m", "hypertrain.cli", *argv])
    try:
        away = auditor.until("service_unreachable")
        assert live_service.url in away["detail"] and away["retry_in_s"] >= 1, away
        live_service.start()
        assert relay.url.removeprefix("http://") in auditor.until("relay_unreachable")["detail"]
        relay.start()
        assert auditor.until("started")["run_id"] == "run-1"
        assert auditor.proc.poll() is None
    finally:
        auditor.close()
        relay.close()


@pytest.mark.parametrize("command", ["run", "watch"])
def test_miner_follow_waits_for_a_service_that_starts_late(
    live_service: LiveService, tmp_path: Path, command: str
) -> None:
    """``run --follow`` and ``watch --follow`` wait at start, then poll the rounds."""
    _create_run(live_service, tmp_path, determinism=_host_record())
    key = _new_key(tmp_path, "island")
    live_service.stop()
    miner = Events(
        [sys.executable, "-m", "hypertrain.miner.cli", command, "--follow",
         "--service-url", live_service.url, "--relay-url", f"http://127.0.0.1:{_closed_port()}",
         "--run-id", "run-1", "--key-file", str(key), "--dataset-dir", str(tmp_path / "none"),
         "--state-dir", str(tmp_path / "island")]
    )  # fmt: skip
    try:
        away = miner.until("service_unreachable")
        assert live_service.url in away["reason"] and away["retry_in_s"] >= 1, away
        live_service.start()
        assert miner.until("started")["run_id"] == "run-1"
        assert miner.proc.poll() is None
    finally:
        miner.close()
