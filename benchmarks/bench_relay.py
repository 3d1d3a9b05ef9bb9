"""Relay throughput on loopback, as a ratio to a plain file copy of the same bytes.

Starts ``hypertrain relay serve`` as a separate process (so client and server do not
share a GIL), uploads and downloads one random blob with :class:`RelayClient`, and
compares with ``shutil.copyfile`` + fsync (the relay fsyncs what it stores too).
Also records how far the relay process's RSS grows above its idle size while serving;
that growth must stay far below the blob size (everything is streamed in bounded chunks).

    .venv/bin/python benchmarks/bench_relay.py [--mb 64]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from common import best_of, write_result
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from hypertrain.relay.store import blob_key


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_relay(
    root: Path, coordinator: str, max_bytes: int
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    (root / "allow.json").write_text(json.dumps([]))
    cmd = [
        sys.executable, "-m", "hypertrain.cli", "relay", "serve",
        "--port", str(port), "--storage", str(root / "blobs"),
        "--allow-list", str(root / "allow.json"), "--coordinator", coordinator,
        "--max-blob-bytes", str(max_bytes),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("relay did not start") from None
            time.sleep(0.1)


def _proc_mb(pid: int, field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _copy(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    with dst.open("rb+") as handle:
        os.fsync(handle.fileno())
    dst.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="blob size in MiB")
    parser.add_argument("--repeats", type=int, default=3, help="best of N")
    args = parser.parse_args()
    size = args.mb << 20
    key = Hotkey.from_seed(b"\x07" * 32)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "blob.bin"
        src.write_bytes(os.urandom(size))
        copy_s = best_of(lambda: _copy(src, root / "copy.bin"), args.repeats)
        proc, url = _start_relay(root, key.ss58_address, size)
        idle_rss = _proc_mb(proc.pid, "VmRSS")
        try:
            with RelayClient(url, key, "bench", timeout_s=600) as client:
                sha: list[str] = []

                def upload() -> None:
                    stored = root / "blobs" / blob_key(sha[0]) if sha else None
                    if stored is not None:
                        stored.unlink(missing_ok=True)  # force a real upload each time
                    sha[:] = [
                        client.put(
                            src,
                            kind="model",
                            round=0,
                            expiry_round=BeaconClock().current_round() + 600,
                        )
                    ]

                upload_s = best_of(upload, args.repeats)
                out = root / "down.bin"
                download_s = best_of(lambda: client.get_to_file(sha[0], out), args.repeats)
                assert out.read_bytes() == src.read_bytes()
            server_peak = _proc_mb(proc.pid, "VmHWM")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    mb = size / (1 << 20)
    values = {
        "relay_upload_to_copy_ratio": round(copy_s / upload_s, 3),
        "relay_download_to_copy_ratio": round(copy_s / download_s, 3),
        "relay_upload_mb_s": round(mb / upload_s, 1),
        "relay_download_mb_s": round(mb / download_s, 1),
        "file_copy_mb_s": round(mb / copy_s, 1),
        "relay_server_peak_rss_mb": round(server_peak, 1),
        "relay_server_rss_growth_mb": round(server_peak - idle_rss, 1),
        "blob_mb": mb,
    }
    write_result(
        "relay",
        values,
        targets={
            "relay_server_rss_growth_mb": "well below blob_mb (streamed, bounded chunks)",
        },
        notes=(
            "Loopback HTTP, relay in its own process (uvicorn with httptools), client"
            " re-hashes every byte and fsyncs downloads; copy = shutil.copyfile + fsync."
            " Ratio = relay MB/s / copy MB/s, best of the repeats. Client and relay share the"
            " 2 cores; the copy baseline itself varies 650-1000 MB/s between runs here."
        ),
    )


if __name__ == "__main__":
    main()
