"""A real S3 API for the relay tests: moto's standalone server as a child process on
loopback, and the environment every AWS client (s3fs, boto3) reads to reach it.

The server runs in its own process, as MinIO or AWS would, so the relay talks to it
over HTTP exactly as in production. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_up(proc: subprocess.Popen[bytes], url: str) -> bool:
    """True once the server answers; False if it exited first (its port was taken)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            time.sleep(0.05)
            continue
        return True
    raise AssertionError(f"moto server at {url} did not start in {START_TIMEOUT_S} s")


@contextmanager
def moto_server(log_path: Path) -> Iterator[str]:
    """Start ``moto.server`` on a free loopback port; yield its endpoint URL; stop it."""
    for _attempt in range(3):  # another process may take the port before moto binds it
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            if _wait_until_up(proc, url):
                yield url
                return
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    raise AssertionError(f"moto server did not start; see {log_path}")


def s3_environment(endpoint: str, home: Path) -> dict[str, str]:
    """The variables the relay's docs name: endpoint and credentials from the environment;
    the shared config files point into ``home`` so no user profile is read."""
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "relay-test",
        "AWS_SECRET_ACCESS_KEY": "relay-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(home / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials"),
    }
