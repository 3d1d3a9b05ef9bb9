"""What the admission challenge costs at join: wall seconds of ``hypertrain-miner join``.

A local beacon (1 s period), the challenge service and an auditor run as processes on
loopback, with two runs of the tiny preset: one with ``admission.challenge`` off (the
self-reported hash, the baseline) and one with it on (the default). Each join is timed
from the command's start to its exit: process start, manifest, self-check, and with the
challenge on the wait for the seed beacon round (``delay_rounds``), the workload with
that seed, the answer and the wait for the auditor's check. The model preset does not
enter: the workload is the fixed self-check, so proxy costs the same. The compute parts
are timed in this process too (self-check, challenge workload, worker recompute).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import torch
from tests.auditor.world import make_dataset, manifest_doc
from tests.e2e.launch import REPO, Fleet, http_ok, listener, port_of, wait_for

from common import write_result
from hypertrain.auditor.admission import reference_hash
from hypertrain.beacon import start_local_beacon
from hypertrain.miner.admission import challenge_hashes, selfcheck
from hypertrain.protocol.identity import Hotkey, write_key_file
from hypertrain.protocol.manifest import AdmissionSpec

JOINS = 3  # per run
TOKENS = {"internal": "i" * 32, "admin": "a" * 32, "worker": "w" * 32}


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _timed(fn: Any, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _join(root: Path, run_id: str, name: str, service: str, coord: str) -> float:
    toml = root / f"{run_id}-{name}.toml"
    toml.write_text(
        f'run_id = "{run_id}"\n[network]\nservice_url = "{service}"\n'
        f'[wallet]\nname = "b"\nhotkey = "{name}"\npath = "{root / "wallets"}"\n'
        f'[node]\nstate_dir = "{root / "state" / name}"\npoll_s = 0.2\n'
    )
    args = ["-m", "hypertrain.miner.cli", "join", "--config", str(toml), "--coordinator", coord]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    admitted = '"admitted": true' in done.stdout or '"status": "admitted"' in done.stdout
    if done.returncode != 0 or not admitted:
        raise SystemExit(f"join failed: {done.stdout}{done.stderr}")
    return wall


def network_joins(root: Path) -> dict[str, list[float]]:
    dataset = make_dataset(REPO / "tests" / "assets", root / "dataset")
    names = {run: [f"{run}-{i}" for i in range(JOINS)] for run in ("plain", "challenge")}
    keys = {}
    for i, name in enumerate([n for ns in names.values() for n in ns] + ["auditor"]):
        path = root / "wallets" / "b" / "hotkeys" / name
        keys[name] = (path, write_key_file(bytes([0x20 + i]) * 32, path))
    hotkeys = {keys[n][1].ss58_address: i for i, ns in enumerate(names.values()) for n in ns}
    doc = {"epoch": 1, "block": 1, "netuid": 100, "hotkeys": hotkeys}
    (root / "metagraph.json").write_text(json.dumps(doc))
    secrets = {n: _private(root / f"{n}.token", t) for n, t in TOKENS.items()}
    coord_file = _private(root / "coord.key", "77" * 32)
    coord = Hotkey.from_seed(bytes.fromhex("77" * 32)).ss58_address
    sock = listener()
    service = f"http://127.0.0.1:{port_of(sock)}"
    fleet = Fleet(root / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    times: dict[str, list[float]] = {}
    with start_local_beacon(root / "beacon", period_s=1) as beacon:
        env = {
            "CHALLENGE_STATE_DIR": str(root / "service"),
            "CHALLENGE_INTERNAL_TOKEN_FILE": str(secrets["internal"]),
            "CHALLENGE_ADMIN_TOKEN_FILE": str(secrets["admin"]),
            "CHALLENGE_WORKER_TOKEN_FILE": str(secrets["worker"]),
            "HYPERTRAIN_COORD_KEY_FILE": str(coord_file),
            "HYPERTRAIN_METAGRAPH_SOURCE": "file",
            "HYPERTRAIN_METAGRAPH_FILE": str(root / "metagraph.json"),
            "HYPERTRAIN_BEACON_URLS": beacon.url,
            "HYPERTRAIN_BEACON_INFO_FILE": str(root / "beacon" / "info.json"),
            "HYPERTRAIN_BEACON_POLL_S": "0.2",
            "HYPERTRAIN_WORKER_HOTKEYS": keys["auditor"][1].ss58_address,
        }
        try:
            fleet.hypertrain("service", "challenge", "serve", env=env, sock=sock)
            wait_for(lambda: http_ok(f"{service}/v1/beacon"), 60, "the service")
            wait_for(lambda: httpx.get(f"{service}/v1/beacon").json()["round"], 30, "a beacon")
            report = selfcheck()[0]
            for run in names:
                manifest = manifest_doc(dataset)
                manifest.pop("coordinator")
                manifest["run_id"] = run
                manifest["admission"] = {"challenge": run == "challenge"}
                manifest["selfcheck_reference"] = {report.device_class: report.workload_hash}
                r = httpx.post(
                    f"{service}/admin/v1/runs",
                    headers={"authorization": f"Bearer {TOKENS['admin']}"},
                    json={"manifest": manifest},
                )
                r.raise_for_status()
            fleet.hypertrain(
                "auditor", "auditor", "run", "--follow", "--poll-s", "0.2",
                "--service-url", service, "--relay-url", "http://127.0.0.1:9",
                "--run-id", "challenge",
                "--worker-token-file", str(secrets["worker"]),
                "--key-file", str(keys["auditor"][0]), "--dataset-dir", str(root / "dataset"),
                "--coordinator", coord,
            )  # fmt: skip
            wait_for(lambda: "started" in fleet.tail("auditor"), 120, "the auditor")
            for run, ns in names.items():
                times[run] = [_join(root, run, n, service, coord) for n in ns]
        finally:
            fleet.stop()
            sock.close()
    return times


def main() -> None:
    spec = AdmissionSpec()
    cpu = torch.device("cpu")
    plain_check = _timed(lambda: selfcheck([cpu]))
    answer = _timed(lambda: challenge_hashes(12345, spec.workload_steps, [cpu]))
    recompute = _timed(lambda: reference_hash(12345, spec.workload_steps, cpu))
    with tempfile.TemporaryDirectory() as tmp:
        times = network_joins(Path(tmp))
    plain, challenged = (statistics.median(times[r]) for r in ("plain", "challenge"))
    write_result(
        "admission",
        {
            "join_wall_s_plain": round(plain, 3),
            "join_wall_s_challenge": round(challenged, 3),
            "join_challenge_vs_plain_ratio": round(challenged / plain, 3),
            "join_challenge_extra_s": round(challenged - plain, 3),
            "beacon_period_s": 1,
            "delay_rounds": spec.delay_rounds,
            "answer_window_rounds": spec.answer_window_rounds,
            "workload_steps": spec.workload_steps,
            "selfcheck_s": round(plain_check, 4),
            "challenge_workload_s_one_device": round(answer, 4),
            "worker_recompute_s": round(recompute, 4),
        },
        notes=(
            f"median of {JOINS} joins per run, each a fresh hypertrain-miner join process"
            " (tiny preset; the preset does not enter the workload). Local beacon at 1 s;"
            " on drand quicknet (3 s) the seed wait is up to delay_rounds x 3 s longer."
            " The 2-core machine was shared with other jobs (load about 9)."
        ),
    )


if __name__ == "__main__":
    main()
