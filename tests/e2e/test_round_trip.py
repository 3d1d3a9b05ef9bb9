"""Two rounds of the whole network as real processes on loopback, on real text.

Local beacon, challenge service, relay, aggregator, auditor and three islands (two
honest, one training on the wrong samples) run as separate processes. Each island is
admitted through the admission challenge (on by default): ``hypertrain-miner join``
answers it and waits until the auditor's recomputed reference admits it. The honest
islands are accepted and paid into escrow, the cheater is caught by byte comparison
and its reward burned, round 1 starts from round 0's merged model, and
``aggregator verify-tape`` recomputes the merge to the same bytes.

The service reads the beacon through a :class:`~tests.e2e.gate.BeaconGate`, which holds
back a round that would close a window before every island committed or every verdict
arrived. The service's deadlines also follow its own clock (the beacon schedule), which
no gate can hold back, so the commit and audit windows are generous: each closes as soon
as its work is done, and a slow or loaded machine makes the test longer, not wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.miner.admission import selfcheck
from hypertrain.protocol.identity import Hotkey, write_key_file
from tests.auditor.world import make_dataset, manifest_doc
from tests.e2e.gate import BeaconGate, gate_rounds
from tests.e2e.launch import REPO, Fleet, listener, port_of, wait_for, wait_started
from tests.e2e.network import (
    TOKENS,
    miner_toml,
    relay_args,
    service_env,
    wait_servers,
    write_metagraph,
    write_secrets,
)

pytestmark = pytest.mark.slow
RUN = "run-t"
HONEST = ("honest-a", "honest-b")
CHEATER = "cheater"


def _keys(root: Path) -> dict[str, tuple[Path, Hotkey]]:
    names = (*HONEST, CHEATER, "auditor", "aggregator")
    out = {}
    for i, name in enumerate(names):
        path = root / "wallets" / "e2e" / "hotkeys" / name
        out[name] = (path, write_key_file(bytes([0x40 + i]) * 32, path))
    return out


def _manifest(dataset: Any) -> dict[str, Any]:
    # each phase closes as soon as all three islands committed, or all have a verdict
    doc = manifest_doc(dataset, commit_window_rounds=60, audit_window_rounds=60)
    doc.pop("coordinator")
    doc["admission"] = {"answer_window_rounds": 30}  # the challenge is on by default
    report = selfcheck()[0]
    doc["selfcheck_reference"] = {report.device_class: report.workload_hash}
    return doc


def test_two_rounds_honest_paid_cheater_burned(tmp_path: Path, beacon: LocalBeaconProcess) -> None:
    dataset = make_dataset(REPO / "tests" / "assets", tmp_path / "dataset")
    keys = _keys(tmp_path)
    sec = write_secrets(tmp_path)
    secrets, coord = sec.tokens, sec.coord
    islands = [keys[n][1].ss58_address for n in (*HONEST, CHEATER)]
    workers = [keys[n][1].ss58_address for n in ("auditor", "aggregator")]
    write_metagraph(tmp_path / "metagraph.json", {h: i for i, h in enumerate(islands)})
    (tmp_path / "allow.json").write_text(json.dumps([*islands, *workers]))
    svc_sock, relay_sock = listener(), listener()
    gate = BeaconGate(beacon.url)
    svc_port, relay_port = port_of(svc_sock), port_of(relay_sock)
    service, relay = f"http://127.0.0.1:{svc_port}", f"http://127.0.0.1:{relay_port}"
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    svc_env = service_env(
        tmp_path, gate.url, sec, workers, HYPERTRAIN_AGGREGATOR_HOTKEYS=workers[1]
    )
    gating = ExitStack()
    try:
        gating.enter_context(gate_rounds(gate, beacon.chain.chain_hash_hex, service, RUN, 3))
        fleet.hypertrain("service", "challenge", "serve", env=svc_env, sock=svc_sock)
        fleet.hypertrain(
            "relay", "relay", *relay_args(tmp_path, RUN, coord, beacon.chain), sock=relay_sock
        )
        wait_servers(service, relay)
        admin = {"authorization": f"Bearer {TOKENS['admin']}"}
        r = httpx.post(
            f"{service}/admin/v1/runs", headers=admin, json={"manifest": _manifest(dataset)}
        )
        assert r.status_code == 200, r.text
        common = [
            "--service-url",
            service,
            "--relay-url",
            relay,
            "--run-id",
            RUN,
            "--worker-token-file",
            str(secrets["worker"]),
        ]
        # the auditor first: it recomputes the admission challenges the joins wait for
        fleet.hypertrain(
            "auditor",
            "auditor",
            "run",
            *common,
            "--key-file",
            str(keys["auditor"][0]),
            "--dataset-dir",
            str(tmp_path / "dataset"),
            "--coordinator",
            coord,
            "--follow",
            "--poll-s",
            "0.5",
        )
        tomls = {
            n: miner_toml(tmp_path, RUN, n, (service, relay), tmp_path / "dataset")
            for n in (*HONEST, CHEATER)
        }
        for toml in tomls.values():
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "hypertrain.miner.cli",
                    "join",
                    "--config",
                    str(toml),
                    "--coordinator",
                    coord,
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert '"status": "admitted"' in done.stdout, done.stdout  # through the challenge
        for name, toml in tomls.items():
            args = ("run", "--config", str(toml), "--coordinator", coord, "--follow")
            if name == CHEATER:  # the cheat is injected by the operator's honeypot tooling
                honeypot = ["-m", "hypertrain.honeypot.island", "--strategy", "wrong-samples"]
                fleet.start(name, [*honeypot, "--", *args])
            else:
                fleet.miner(name, *args)
        wait_started(fleet, list(tomls), 120)  # then round 0 opens
        fleet.hypertrain(
            "aggregator",
            "aggregator",
            "run",
            *common,
            "--key-file",
            str(keys["aggregator"][0]),
            "--state-dir",
            str(tmp_path / "agg"),
            "--admin-token-file",
            str(secrets["admin"]),
            "--follow",
            "--poll-s",
            "0.5",
        )
        names = ("service", "relay", "aggregator", "auditor", *tomls)

        def round_final(index: int) -> bool:
            fleet.check_alive(*names)
            rounds = httpx.get(f"{service}/v1/runs/{RUN}/rounds").json()
            return len(rounds) > index and rounds[index]["phase"] == "final"

        wait_for(lambda: round_final(0), 300, "round 0 to be final", poll_s=1)
        _check_round_0(service, keys)
        wait_for(lambda: round_final(1), 300, "round 1 to be final", poll_s=1)
        _check_round_1(service, relay, fleet)
        _check_miner_views(tomls[HONEST[0]], coord)
    except (AssertionError, KeyError):
        for name in fleet.procs:
            sys.stderr.write(f"--- {name}\n{fleet.tail(name, 1500)}\n")
        raise
    finally:
        gating.close()
        fleet.stop()
        svc_sock.close()
        relay_sock.close()
        gate.close()


def _check_round_0(service: str, keys: dict[str, tuple[Path, Hotkey]]) -> None:
    detail = httpx.get(f"{service}/v1/runs/{RUN}/rounds/0").json()
    results = {v["envelope"]["body"]["hotkey"]: v["envelope"]["body"] for v in detail["verdicts"]}
    for name in HONEST:
        assert results[keys[name][1].ss58_address]["result"] == "match"
    bad = results[keys[CHEATER][1].ss58_address]
    assert bad["result"] == "mismatch" and bad["first_bad_leaf"] == 1, bad
    roster = {r["hotkey"]: r for r in httpx.get(f"{service}/v1/runs/{RUN}/roster").json()}
    for name in HONEST:
        assert roster[keys[name][1].ss58_address]["escrow"] > 0
    cheater = roster[keys[CHEATER][1].ss58_address]
    assert cheater["escrow"] == 0 and cheater["paid"] == 0, cheater


def _check_round_1(service: str, relay: str, fleet: Fleet) -> None:
    r0 = httpx.get(f"{service}/v1/runs/{RUN}/rounds/0").json()
    r1 = httpx.get(f"{service}/v1/runs/{RUN}/rounds/1").json()
    merged = r0["merge"]["body"]
    assert r1["open"]["body"]["start_model_sha256"] == merged["new_model_sha256"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hypertrain.cli",
            "aggregator",
            "verify-tape",
            merged["tape_sha256"],
            "--relay-url",
            relay,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(
        e.get("event") == "committed" and e.get("round") == 1 for e in fleet.events(HONEST[0])
    )


def _check_miner_views(toml: Path, coord: str) -> None:
    """``status`` and one ``watch`` pass work against the live network."""
    for command in ("status", "watch"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hypertrain.miner.cli",
                command,
                "--config",
                str(toml),
                "--coordinator",
                coord,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "match" in done.stdout, done.stdout
