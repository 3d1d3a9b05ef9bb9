"""Start the local beacon as a child process and learn its URL and chain.

The devnet and the tests both need a real ``hypertrain beacon serve`` process on a
free loopback port. :func:`start_local_beacon` runs it with ``--port 0`` and a ready
file: the child binds, then atomically writes ``{"url", "chain_info"}`` there, so the
parent never races the bind. The child's output goes to ``beacon.log`` in the state
directory; :meth:`LocalBeaconProcess.stop` terminates it (then kills it if needed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hypertrain.beacon.chain import ChainInfo, parse_chain_info
from hypertrain.beacon.errors import BeaconError
from hypertrain.beacon.local import DEFAULT_BEACON_ID


@dataclass
class LocalBeaconProcess:
    """A running ``hypertrain beacon serve`` child: its base URL and pinned chain."""

    url: str
    chain: ChainInfo
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)

    def __enter__(self) -> LocalBeaconProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_beacon(
    state_dir: Path,
    *,
    period_s: int = 1,
    key_file: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    beacon_id: str = DEFAULT_BEACON_ID,
    startup_timeout_s: float = 30.0,
) -> LocalBeaconProcess:
    """Run the local beacon as a subprocess; return once it is serving."""
    state_dir.mkdir(parents=True, exist_ok=True)
    ready = state_dir / "ready.json"
    ready.unlink(missing_ok=True)
    log_path = state_dir / "beacon.log"
    command = [
        *(sys.executable, "-m", "hypertrain.cli", "beacon", "serve"),
        *("--host", host, "--port", str(port), "--period-s", str(period_s)),
        *("--key-file", str(key_file or state_dir / "beacon_key.json")),
        *("--state-dir", str(state_dir), "--beacon-id", beacon_id),
        *("--info-out", str(state_dir / "info.json"), "--ready-file", str(ready)),
    ]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + startup_timeout_s
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            tail = log_path.read_text(errors="replace")[-2000:]
            raise BeaconError(f"local beacon did not start (exit {process.returncode}): {tail}")
        time.sleep(0.05)
    doc = json.loads(ready.read_text())
    return LocalBeaconProcess(
        url=doc["url"],
        chain=parse_chain_info(doc["chain_info"]),
        process=process,
        log_path=log_path,
    )
