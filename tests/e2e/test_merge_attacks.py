"""Unaudited rounds cannot be farmed: copies that are not byte-identical and reversed
updates, on a real network of processes.

Local beacon, challenge service, relay, auditor and aggregator (with a held-out batch),
two honest islands and three attackers (:mod:`tests.e2e.merge_attackers`, each signing
real envelopes and uploading real blobs) run as separate processes for two rounds. The
audit rate is 0 with one probation round, counted in committed rounds: in round 0 every
island, the attackers included, trains honestly and is audited (the attackers serve
their probation; the proven norms become the reference), round 1 audits nobody, and in it

* ``noisy`` commits honest-a's update plus noise (cosine about 0.98),
* ``average`` commits the mean of honest-a's and honest-b's updates,
* ``reversed`` trains honestly and commits its update negated.

The first two are excluded as ``near_duplicate`` (explained by earlier updates), the
third as ``against_aggregate``; none is paid for round 1 (roster and ``get_weights``):
each attacker keeps exactly its share of round 0's pool, the honest islands share round
1's, and the held-out loss after round 1 is below round 0's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.protocol.identity import Hotkey, write_key_file
from tests.auditor.world import make_dataset
from tests.e2e.gate import BeaconGate
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
from tests.e2e.test_attacks import (
    POOL,
    RUN,
    _gate,
    _join_all,
    _manifest,
    _register,
    start_probation,
)

pytestmark = pytest.mark.slow
HONEST = ("honest-a", "honest-b")
ATTACKERS = ("noisy", "average", "reversed")
ISLANDS = (*HONEST, *ATTACKERS)
COMMITS = {0: 5, 1: 5}  # round 0: everyone's probation; round 1: the attacks


def _start(fleet: Fleet, tomls: dict[str, Path], coord: str, ss58: dict[str, str]) -> None:
    for name in ISLANDS:
        miner = ["run", "--config", str(tomls[name]), "--coordinator", coord, "--follow"]
        if name in HONEST:
            fleet.miner(name, *miner)
            continue
        victims = {"noisy": ["honest-a"], "average": list(HONEST)}.get(name, [])
        extra = [a for v in victims for a in ("--victim", ss58[v])]
        cmd = ["-m", "tests.e2e.merge_attackers", name, "--round", "1", *extra, "--", *miner]
        fleet.start(name, cmd)


@pytest.mark.timeout(1200)  # every island trains and is audited in round 0
def test_noisy_copies_averages_and_reversed_updates_are_not_paid(
    tmp_path: Path, beacon: LocalBeaconProcess
) -> None:
    dataset = make_dataset(REPO / "tests" / "assets", tmp_path / "dataset")
    keys: dict[str, tuple[Path, Hotkey]] = {}
    for i, name in enumerate((*ISLANDS, "auditor", "aggregator")):
        path = tmp_path / "wallets" / "e2e" / "hotkeys" / name
        keys[name] = (path, write_key_file(bytes([0x30 + i]) * 32, path))
    ss58 = {name: key.ss58_address for name, (_, key) in keys.items()}
    sec = write_secrets(tmp_path)
    islands = [ss58[n] for n in ISLANDS]
    workers = [ss58["auditor"], ss58["aggregator"]]
    uids = {h: i for i, h in enumerate(islands)}
    write_metagraph(tmp_path / "metagraph.json", uids)
    (tmp_path / "allow.json").write_text(json.dumps([*islands, *workers]))
    svc_sock, relay_sock = listener(), listener()
    gate = BeaconGate(beacon.url)
    service = f"http://127.0.0.1:{port_of(svc_sock)}"
    relay = f"http://127.0.0.1:{port_of(relay_sock)}"
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    svc_env = service_env(
        tmp_path, gate.url, sec, workers, HYPERTRAIN_METAGRAPH_REFRESH_S="0.3",
        HYPERTRAIN_AGGREGATOR_HOTKEYS=ss58["aggregator"],
    )  # fmt: skip
    worker = str(sec.tokens["worker"])
    common = ["--service-url", service, "--relay-url", relay, "--run-id", RUN,
              "--worker-token-file", worker, "--poll-s", "0.3", "--follow"]  # fmt: skip
    try:
        with _gate(gate, beacon.chain.chain_hash_hex, service, COMMITS):
            fleet.hypertrain("service", "challenge", "serve", env=svc_env, sock=svc_sock)
            relay_cmd = relay_args(tmp_path, RUN, sec.coord, beacon.chain)
            fleet.hypertrain("relay", "relay", *relay_cmd, sock=relay_sock)
            wait_servers(service, relay)
            admin = {"authorization": f"Bearer {TOKENS['admin']}"}
            r = httpx.post(
                f"{service}/admin/v1/runs", headers=admin, json={"manifest": _manifest(dataset)}
            )
            assert r.status_code == 200, r.text
            data_dir = str(tmp_path / "dataset")
            auditor = ["--key-file", str(keys["auditor"][0]),
                       "--dataset-dir", data_dir, "--coordinator", sec.coord]  # fmt: skip
            fleet.hypertrain("auditor", "auditor", "run", *common, *auditor)
            tomls = {
                n: miner_toml(tmp_path, RUN, n, (service, relay), tmp_path / "dataset", 0.3)
                for n in ISLANDS
            }
            _start(fleet, tomls, sec.coord, ss58)
            _join_all(tomls, sec.coord)
            start_probation(fleet, tomls, sec.coord, ATTACKERS)  # round 0, trained honestly
            wait_for(
                lambda: len(httpx.get(f"{service}/v1/runs/{RUN}/roster").json()) == len(ISLANDS),
                120,
                "every island admitted",
            )
            _register(service, tmp_path, 101, uids)  # round 0: everyone, on probation
            aggregator = ["--key-file", str(keys["aggregator"][0]),
                          "--state-dir", str(tmp_path / "agg"),
                          "--admin-token-file", str(sec.tokens["admin"]),
                          "--dataset-dir", data_dir, "--last-round", "1"]  # fmt: skip
            wait_started(fleet, [*ISLANDS, *(f"{n}-probation" for n in ATTACKERS)], 300)
            fleet.hypertrain("aggregator", "aggregator", "run", *common, *aggregator)

            def rounds() -> list[dict[str, Any]]:
                fleet.check_alive("service", "relay", "aggregator", "auditor", *HONEST)
                got: list[dict[str, Any]] = httpx.get(f"{service}/v1/runs/{RUN}/rounds").json()
                return got

            wait_for(lambda: rounds() and rounds()[0]["commits"] == COMMITS[0], 240, "commits")
            assert len(rounds()) == 1  # round 1 opens after round 0's merge
            wait_for(lambda: len(rounds()) > 1 and rounds()[1]["phase"] == "final", 240,
                     "round 1 to be final", poll_s=1)  # fmt: skip
        _check(service, ss58)
    except Exception:
        for name in fleet.procs:
            sys.stderr.write(f"--- {name}\n{fleet.tail(name, 1500)}\n")
        raise
    finally:
        fleet.stop()
        svc_sock.close()
        relay_sock.close()
        gate.close()


def _check(service: str, ss58: dict[str, str]) -> None:
    detail = [httpx.get(f"{service}/v1/runs/{RUN}/rounds/{i}").json() for i in (0, 1)]
    merge0, merge1 = (d["merge"]["body"] for d in detail)
    honest = sorted(ss58[n] for n in HONEST)
    assert sorted(merge0["included"]) == sorted(ss58[n] for n in ISLANDS), merge0
    assert detail[1]["assignments"] == []  # round 1 is not audited: probation was served
    assert sorted(merge1["included"]) == honest, merge1
    assert merge1["excluded"] == {
        ss58["noisy"]: "near_duplicate",
        ss58["average"]: "near_duplicate",
        ss58["reversed"]: "against_aggregate",
    }, merge1
    assert merge1["eval_loss"] < merge0["eval_loss"], (merge0, merge1)  # it did not rise
    roster = {row["hotkey"]: row for row in httpx.get(f"{service}/v1/runs/{RUN}/roster").json()}
    earned = {
        n: sum(roster[ss58[n]][k] for k in ("escrow", "held", "vested", "paid")) for n in ISLANDS
    }
    share0, share1 = POOL // len(ISLANDS), POOL // len(HONEST)
    # round 0's pool to the five islands that trained it, round 1's to the honest two only
    assert earned == dict.fromkeys(HONEST, share0 + share1) | dict.fromkeys(ATTACKERS, share0), (
        earned
    )
    internal = {"authorization": f"Bearer {TOKENS['internal']}",
                "x-platform-challenge-slug": "hypertrain"}  # fmt: skip
    r = httpx.get(f"{service}/internal/v1/get_weights", params={"epoch": 1}, headers=internal)
    assert r.status_code == 200, r.text
    weights = r.json()["weights"]
    assert all(weights.get(ss58[n], 0) <= share0 for n in ATTACKERS), weights
    assert all(weights.get(ss58[n], 0) > 0 for n in HONEST), weights
