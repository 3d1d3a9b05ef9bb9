"""A dispute end to end as real processes: a lying auditor loses to an honest island.

Local beacon, challenge service, relay, aggregator, a honeypot auditor that flips
its verdict, a referee and one honest island (``run --follow`` and ``watch
--follow``) run as separate processes. The island's own replay refutes the verdict,
so ``watch --follow`` disputes on its own; the auditor's honest answers reach the
island's leaf and the verdict is overturned. A second, honest auditor's re-audit of the
assignment agrees with the island, so the lying auditor is barred and the round settles
paying the island (one lost game alone would only hold the reward).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.miner.admission import selfcheck
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
from hypertrain.protocol.identity import write_key_file
from tests.auditor.world import make_dataset, manifest_doc
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
ISLAND = "honest"


def _honeypots(island: str, auditor: str) -> HoneypotList:
    entries = [
        HoneypotEntry(hotkey=island, role="island", strategy="honest"),
        HoneypotEntry(hotkey=auditor, role="auditor", strategy="lying"),
    ]
    return HoneypotList(salt="3c" * 32, entries=entries)


def _manifest(dataset: Any, referee: str, honeypots: HoneypotList) -> dict[str, Any]:
    doc = manifest_doc(
        dataset, commit_window_rounds=40, audit_window_rounds=30, dispute_window_rounds=30
    )
    doc.pop("coordinator")
    report = selfcheck()[0]
    doc["selfcheck_reference"] = {report.device_class: report.workload_hash}
    doc["admission"] = {"answer_window_rounds": 30}  # the challenge is on by default
    doc["dispute"] = {"bond": 0, "answer_rounds": 20, "referee_rounds": 20, "referees": [referee]}
    doc["honeypots"] = {"commitment": commitment(honeypots), "reveal_round": 0}
    return doc


PERTURB = (1, 1, 5)  # global step 1 (segment 0), mb0.layers.1, its sixth operation


@pytest.mark.parametrize("case", ["lying-auditor", "cheating-island"])
def test_dispute_decided_through_watch_follow(
    tmp_path: Path, beacon: LocalBeaconProcess, case: str
) -> None:
    """lying-auditor: the island wins and is paid; cheating-island: it disputes and loses."""
    dataset = make_dataset(REPO / "tests" / "assets", tmp_path / "dataset")
    keys = {}
    for i, name in enumerate((ISLAND, "auditor", "aggregator", "referee", "auditor2")):
        path = tmp_path / "wallets" / "e2e" / "hotkeys" / name
        keys[name] = (path, write_key_file(bytes([0x50 + i]) * 32, path))
    sec = write_secrets(tmp_path)
    secrets, coord = sec.tokens, sec.coord
    island = keys[ISLAND][1].ss58_address
    workers = [keys[n][1].ss58_address for n in ("auditor", "aggregator", "auditor2")]
    write_metagraph(tmp_path / "metagraph.json", {island: 0})
    (tmp_path / "allow.json").write_text(json.dumps([island, *workers]))
    svc_sock, relay_sock = listener(), listener()
    svc_port, relay_port = port_of(svc_sock), port_of(relay_sock)
    service, relay = f"http://127.0.0.1:{svc_port}", f"http://127.0.0.1:{relay_port}"
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    env = service_env(tmp_path, beacon.url, sec, workers, HYPERTRAIN_AGGREGATOR_HOTKEYS=workers[1])
    try:
        fleet.hypertrain("service", "challenge", "serve", env=env, sock=svc_sock)
        fleet.hypertrain(
            "relay", "relay", *relay_args(tmp_path, RUN, coord, beacon.chain), sock=relay_sock
        )
        wait_servers(service, relay)
        admin = {"authorization": f"Bearer {TOKENS['admin']}"}
        honeypots = _honeypots(island, workers[0])
        doc = _manifest(dataset, keys["referee"][1].ss58_address, honeypots)
        r = httpx.post(f"{service}/admin/v1/runs", headers=admin, json={"manifest": doc})
        assert r.status_code == 200, r.text
        toml = miner_toml(tmp_path, RUN, ISLAND, (service, relay), tmp_path / "dataset")
        common = [
            "--service",
            service,
            "--relay",
            relay,
            "--run-id",
            RUN,
            "--worker-token-file",
            str(secrets["worker"]),
        ]
        auditor_module = (
            "hypertrain.honeypot.auditor" if case == "lying-auditor" else "hypertrain.cli"
        )
        auditor_args = [] if case == "lying-auditor" else ["auditor", "run", "--follow"]
        fleet.start(
            "auditor",
            [
                "-m",
                auditor_module,
                *auditor_args,
                *common,
                "--key-file",
                str(keys["auditor"][0]),
                "--dataset-dir",
                str(tmp_path / "dataset"),
                "--coordinator",
                coord,
                "--poll-s",
                "0.5",
            ],
        )
        if case == "lying-auditor":  # the independent re-audit of the disputed verdict
            fleet.start(
                "auditor2",
                [
                    "-m", "hypertrain.cli", "auditor", "run", "--follow", *common,
                    "--key-file", str(keys["auditor2"][0]),
                    "--dataset-dir", str(tmp_path / "dataset"),
                    "--coordinator", coord, "--poll-s", "0.5",
                ],
            )  # fmt: skip
        # joined only now: the auditor recomputes the admission challenge the join waits for
        miner = [sys.executable, "-m", "hypertrain.miner.cli"]
        done = subprocess.run(
            [*miner, "join", "--config", str(toml), "--coordinator", coord],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        fleet.hypertrain(
            "referee",
            "referee",
            "serve",
            "--service",
            service,
            "--run-id",
            RUN,
            "--key-file",
            str(keys["referee"][0]),
            "--coordinator",
            coord,
            "--poll-s",
            "0.5",
        )
        miner = ["-m", "hypertrain.miner.cli"]
        if case == "cheating-island":
            where = ":".join(str(x) for x in PERTURB)
            miner = ["-m", "hypertrain.honeypot.island", "--perturb", where, "--"]
        for name, command in (("island", "run"), ("watch", "watch")):
            fleet.start(
                name, [*miner, command, "--config", str(toml), "--coordinator", coord, "--follow"]
            )
        wait_started(fleet, ["island"], 120)  # then round 0 opens
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
            "--last-round",  # one round: rounds close on work, so more would race the game
            "0",
        )
        names = ("service", "relay", "aggregator", "auditor", "referee", "island", "watch")

        def round_final() -> bool:
            fleet.check_alive(*names)
            rounds = httpx.get(f"{service}/v1/runs/{RUN}/rounds").json()
            return bool(rounds) and rounds[0]["phase"] == "final"

        wait_for(round_final, 480, "round 0 to be final", poll_s=1)
        disputes = httpx.get(f"{service}/v1/disputes", params={"run_id": RUN}).json()
        # rounds advance on work, so later rounds (and their disputes) may already be under way
        first = next(d for d in disputes if d["round"] == 0)
        game = first["game"]
        assert first["hotkey"] == island and first["auditor"] == workers[0]
        roster = {row["hotkey"]: row for row in httpx.get(f"{service}/v1/runs/{RUN}/roster").json()}
        events = [e["event"] for e in fleet.events("watch")]
        assert "dispute_opened" in events and "dispute_answer" in events, events
        if case == "lying-auditor":
            assert game["outcome"] == "overturned", game
            assert [s["level"] for s in game["steps"]][-1] == "decided", game
            faulty = httpx.get(f"{service}/v1/runs/{RUN}/reassigned").json()
            assert all(f["hotkey"] != island for f in faulty), faulty  # re-audited
            assert roster[island]["escrow"] > 0, roster[island]
            _check_honeypots(service, admin, honeypots)
            return
        # the game pins the perturbed step, layer and operation; the referee upholds
        assert game["outcome"] == "upheld" and "referee" in game["reason"], game
        assert (game["segment"], game["step"]) == (0, PERTURB[0]), game
        assert (game["section"], game["op_index"]) == PERTURB[1:], game
        assert roster[island]["escrow"] == 0, roster[island]
    except AssertionError:
        for name in fleet.procs:
            sys.stderr.write(f"--- {name}\n{fleet.tail(name, 2500)}\n")
        raise
    finally:
        fleet.stop()


def _check_honeypots(service: str, admin: dict[str, str], honeypots: HoneypotList) -> None:
    """Reveal the committed list and print the table with ``hypertrain challenge honeypots``."""
    r = httpx.post(
        f"{service}/admin/v1/runs/{RUN}/honeypots",
        headers=admin,
        json=honeypots.model_dump(mode="json"),
    )
    assert r.status_code == 200, r.text
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hypertrain.cli",
            "challenge",
            "honeypots",
            "--url",
            service,
            "--run-id",
            RUN,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    header = lines[0]
    rows = {(row[0], row[1]): dict(zip(header, row, strict=True)) for row in lines[1:]}
    honest = rows[("island", "honest")]
    assert (honest["false_positives"], honest["disputes_won"]) == ("1", "1"), done.stdout
    assert rows[("auditor", "lying")]["disputes_lost"] == "1", done.stdout
