"""Load benchmark of the challenge service: 256 simulated miners joining and committing.

Starts the local beacon and the service (the documented uvicorn command) on loopback,
creates RUNS runs, lets every miner join every run, opens a round in each, then all
miners commit concurrently (one commit per miner per run, real sr25519 signatures
made up front so the load generator measures the service, not its own signing).
Reports sustained commits/s and the p50/p99 latency of the commit requests, plus
the CPU the service and the load generator spent per commit (in the notes).

    .venv/bin/python benchmarks/bench_challenge.py [--miners 256] [--runs 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from common import write_result
from hypertrain.beacon import start_local_beacon
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey

CLASS = "cpu:bench"
HASH = "ab" * 32


def _private(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def _manifest(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "seed": 1,
        "model": {
            "vocab_size": 256,
            "d_model": 16,
            "num_layers": 1,
            "num_heads": 2,
            "head_dim": 8,
            "ffn_hidden": 32,
            "context_length": 32,
        },
        "round": {"inner_steps": 8, "checkpoint_interval": 2, "commit_window_rounds": 100000},
        "data": {
            "dataset_root": "11" * 32,
            "descriptor_sha256": "22" * 32,
            "tokenizer_sha256": "33" * 32,
            "sample_count": 100,
            "seq_len": 16,
        },
        "determinism": {"torch_version": "2.13.0", "num_threads": 1, "device_class": CLASS},
        "selfcheck_reference": {CLASS: HASH},
    }


def _join(key: Hotkey, run_id: str) -> dict[str, Any]:
    body = {
        "devices": [
            {
                "index": 0,
                "name": "b",
                "device_class": CLASS,
                "memory_bytes": 1 << 20,
                "workload_hash": HASH,
            }
        ],
        "layout": {"dp_ranks": 1, "micro_batches": 1, "micro_batch_size": 4},
    }
    return seal(key, domain="join", run_id=run_id, body=body, expiry_round=10**12).model_dump()


def _commit(key: Hotkey, run_id: str) -> dict[str, Any]:
    body = {
        "round": 0,
        "checkpoint_root": "44" * 32,
        "leaf_count": 5,
        "update_sha256": "55" * 32,
        "update_bytes": 1 << 20,
        "tokens": 8 * 4 * 15,  # H x samples per step x (seq_len - 1): the island budget
        "update_url": "http://relay/x",
    }
    return seal(key, domain="commit", run_id=run_id, body=body, expiry_round=10**12).model_dump()


def _request_bytes(path: str, env: dict[str, Any]) -> bytes:
    body = json.dumps(env).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes
) -> tuple[int, bytes]:
    """One keep-alive HTTP/1.1 POST with pre-serialised bytes; (status, body)."""
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length"))
    return status, await reader.readexactly(length)


async def _send_all(
    port: int, envelopes: list[tuple[str, dict[str, Any]]], workers: int
) -> tuple[float, list[float]]:
    """POST every envelope over ``workers`` keep-alive connections; (wall s, latencies).

    A minimal raw HTTP/1.1 client: a general-purpose async client costs several times
    the service's own CPU per request, and on a 2-core box it would measure itself.
    """
    queue = [_request_bytes(path, env) for path, env in envelopes]
    queue.reverse()
    latencies: list[float] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while queue:
                raw = queue.pop()
                start = time.perf_counter()
                status, body = await _post(reader, writer, raw)
                latencies.append(time.perf_counter() - start)
                if status != 200:
                    raise RuntimeError(f"{status} {body[:300]!r}")
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.perf_counter() - start, latencies


async def _send_paced(
    port: int, envelopes: list[tuple[str, dict[str, Any]]], workers: int, rate: float
) -> list[float]:
    """Open-loop load: request i is due at start + i / rate, whatever earlier answers do.

    Latency is counted from the due time, not the send time, so a server that falls
    behind is charged for the queueing it causes (no coordinated omission).
    """
    raws = [_request_bytes(path, env) for path, env in envelopes]
    latencies: list[float] = []
    start = time.perf_counter() + 0.2

    async def worker(offset: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for i in range(offset, len(raws), workers):
                due = start + i / rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                status, body = await _post(reader, writer, raws[i])
                latencies.append(time.perf_counter() - due)
                if status != 200:
                    raise RuntimeError(f"{status} {body[:300]!r}")
        finally:
            writer.close()

    await asyncio.gather(*(worker(w) for w in range(workers)))
    return latencies


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--miners", type=int, default=256)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--paced-runs", type=int, default=8)
    parser.add_argument("--rate", type=float, default=500.0, help="offered commits/s, paced phase")
    args = parser.parse_args()
    keys = [Hotkey.from_seed(secrets.token_bytes(32)) for _ in range(args.miners)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-challenge-"))
    mg = {
        "epoch": 1,
        "block": 1,
        "netuid": 100,
        "hotkeys": {k.ss58_address: i for i, k in enumerate(keys)},
    }
    (tmp / "mg.json").write_text(json.dumps(mg))
    beacon = start_local_beacon(tmp / "beacon", period_s=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "CHALLENGE_STATE_DIR": str(tmp / "state"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": _private(tmp / "i.token", secrets.token_hex(32)),
        "CHALLENGE_ADMIN_TOKEN_FILE": _private(tmp / "a.token", admin := secrets.token_hex(32)),
        "HYPERTRAIN_COORD_KEY_FILE": _private(tmp / "coord.key", secrets.token_hex(32)),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(tmp / "mg.json"),
        "HYPERTRAIN_BEACON_URLS": beacon.url,
        "HYPERTRAIN_BEACON_INFO_FILE": str(tmp / "beacon" / "info.json"),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "hypertrain.challenge.app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
            "--timeout-keep-alive",
            "120",
            "--backlog",
            "4096",
        ],
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(base + "/v1/beacon").json().get("round"):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        admin_h = {"Authorization": f"Bearer {admin}"}
        runs = [f"bench-{i}" for i in range(args.runs + args.paced_runs)]
        for run_id in runs:
            httpx.post(
                base + "/admin/v1/runs", json={"manifest": _manifest(run_id)}, headers=admin_h
            ).raise_for_status()
        joins = [("/v1/join", _join(k, r)) for r in runs for k in keys]
        join_s, _ = asyncio.run(_send_all(port, joins, args.miners))
        for run_id in runs:
            httpx.post(
                base + f"/admin/v1/runs/{run_id}/rounds",
                headers=admin_h,
                json={"start_model_sha256": "66" * 32, "start_model_url": "x"},
            ).raise_for_status()
        saturating, paced = runs[: args.runs], runs[args.runs :]
        commits = [("/v1/commit", _commit(k, r)) for r in saturating for k in keys]
        server_cpu0, client_cpu0 = _cpu_s(server.pid), time.process_time()
        wall, lat = asyncio.run(_send_all(port, commits, args.miners))
        server_cpu = _cpu_s(server.pid) - server_cpu0
        client_cpu = time.process_time() - client_cpu0
        paced_commits = [("/v1/commit", _commit(k, r)) for r in paced for k in keys]
        paced_lat = asyncio.run(_send_paced(port, paced_commits, args.miners, args.rate))
    finally:
        server.terminate()
        server.wait(timeout=10)
        beacon.stop()
    values = {
        "miners": args.miners,
        "commits_per_s": round(len(commits) / wall, 1),
        "offered_commits_per_s": args.rate,
        "p50_ms": round(_percentile(paced_lat, 0.50) * 1000, 2),
        "p99_ms": round(_percentile(paced_lat, 0.99) * 1000, 2),
        "saturated_p50_ms": round(_percentile(lat, 0.50) * 1000, 2),
        "saturated_p99_ms": round(_percentile(lat, 0.99) * 1000, 2),
    }
    per_commit_ms = 1000 * server_cpu / len(commits)
    print(
        values,
        f"joins/s={len(joins) / join_s:.1f}",
        f"server cpu/commit={per_commit_ms:.2f} ms",
        f"client cpu/commit={1000 * client_cpu / len(commits):.2f} ms",
    )
    write_result(
        "challenge",
        values,
        targets={"commits_per_s": ">= 500", "p99_ms": "< 250 (at 500 commits/s offered)"},
        notes=(
            f"Two phases against one uvicorn process, 256 miners with real keys, one keep-alive "
            f"connection each. Saturation: {len(commits)} signed commits ({args.runs} runs x "
            f"{args.miners} miners), every miner keeping one request in flight; "
            f"`commits_per_s` is the sustained rate and `saturated_p*_ms` the latencies there "
            f"(Little's law: about miners / throughput). Paced: {len(paced_commits)} more "
            f"commits offered open-loop at {args.rate:.0f}/s spread over the same miners; "
            f"`p50_ms`/`p99_ms` are measured from each request's due time, so queueing counts. "
            f"Service CPU per commit {per_commit_ms:.2f} ms (a ceiling of "
            f"{1000 / per_commit_ms:.0f} commits/s per free core), load generator CPU per "
            f"commit {1000 * client_cpu / len(commits):.2f} ms, joins/s "
            f"{len(joins) / join_s:.0f}; both on the same 2-core machine (1-min load average at "
            f"the end {os.getloadavg()[0]:.1f})."
        ),
    )


if __name__ == "__main__":
    main()
