"""Attacker islands against a real network of processes: no attack is paid, the model holds.

Local beacon, challenge service, relay, auditor, aggregator (with a held-out batch),
two honest islands and six attacker islands (:mod:`tests.e2e.attackers`, each signing
and posting real envelopes and uploading real blobs) run as separate processes for two
rounds. The audit rate is 0 with one probation round, and probation counts the rounds an
island commits to: round 0 audits every island, round 1 audits none. The attacks that
only an audit can catch cheat in round 0 (their first committed round, so audited);
those the merge screens must catch serve their probation first, training honestly in
round 0 (audited, ``match``, paid for that work like any island), then cheat in round 1,
which nobody audits. Findings covered (docs/mechanism.md):

* finding 1 (start state): ``moments`` writes its own Adam moments into checkpoint 0
  and trains honestly; the full-state hash of checkpoint 0 gives ``mismatch`` at leaf 0,
  it is excluded from the merge (the model is not steered) and not paid;
* finding 2 (auditor totality): ``bad-ref`` (a checkpoint reference that is not a blob
  address) and ``nested-index`` (a deeply nested checkpoint index) get ``unverifiable``
  while the honest islands of the same round still get ``match`` and are paid;
* finding 3 (norm screen): ``x1000`` in the unaudited round is excluded as
  ``norm_outlier`` and the held-out loss does not blow up;
* finding 4 (payment from the merge): ``ghost`` commits its update hash but never
  uploads the update: ``missing_blob``, unpaid for the round (no fault: the tape's word
  burns nothing), keeping only what its honest probation round earned;
* finding 5 (copies): ``copy`` commits honest-a's commit body under its own key: both
  holders of the update are audited in round 1 (docs/mechanism.md, "Audit selection"),
  honest-a matches and is merged and paid, the copy's replay of its own assignment does
  not (``audit_mismatch``), and its escrow, its honest round 0 included, is burned.

Every island joins through the admission challenge (on by default: the auditor
recomputes each answer) before round 0, so every one is in probation there; a round's roster
is who is registered when it opens, so the metagraph registers every island for round 0
and only the honest islands and the round-1 attackers for round 1, and every rostered
island commits (each phase closes on work). Round 1's screen reference comes from round
0's proven norms, which no update of round 1 can move. Payment is read through the
service's public API: the roster's balances (the round-0 attackers 0, each round-1
attacker exactly its share of round 0's pool and nothing of round 1's) and
``get_weights``. Findings 6 (deregistration), 7 (small holes), 9 (settle after
disputes) and 10 (fail-closed clock) stay as in-process tests (tests/challenge,
tests/relay, tests/aggregator). The service's beacon is gated (:mod:`tests.e2e.gate`) so
that a slow machine makes the test slower, never wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.miner.admission import selfcheck
from hypertrain.protocol.identity import Hotkey, write_key_file
from tests.auditor.world import make_dataset, manifest_doc
from tests.e2e.gate import BeaconGate, allowed_round
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
POOL = 1_000_000
HONEST = ("honest-a", "honest-b")
# attacker name -> (strategy, round it cheats in); a round-1 attacker trains honestly in
# round 0 (its probation), a round-0 attacker sits round 1 out
ATTACKERS = {
    "moments": ("moments", 0),
    "bad-ref": ("bad-ref", 0),
    "nested": ("nested-index", 0),
    "x1000": ("x1000", 1),
    "copy": ("copy", 1),
    "ghost": ("ghost", 1),
}
ISLANDS = (*HONEST, *ATTACKERS)
ROUND_ATTACKERS = {w: [n for n, (_, r) in ATTACKERS.items() if r == w] for w in (0, 1)}
# round 0: every island (round-1 attackers serve their probation); round 1: the two honest
# islands and that round's attackers
COMMITS = {0: len(ISLANDS), 1: len(HONEST) + len(ROUND_ATTACKERS[1])}
PROBATION = [f"{n}-probation" for n in ROUND_ATTACKERS[1]]  # their honest round-0 miners


@contextmanager
def _gate(
    gate: BeaconGate, chain_hash: str, service: str, commits: dict[int, int] = COMMITS
) -> Iterator[None]:
    """:func:`tests.e2e.gate.gate_rounds` with a number of committers per round."""
    stop = threading.Event()
    gate.cap = gate.real_latest(chain_hash)

    def loop() -> None:
        with httpx.Client(base_url=service, timeout=10) as client:
            while not stop.wait(0.2):
                try:
                    real = gate.real_latest(chain_hash)
                    r = client.get(f"/v1/runs/{RUN}/rounds")
                    rounds = r.json() if r.status_code == 200 else []
                except (httpx.HTTPError, ValueError):
                    continue
                allowed = min(
                    [real] + [allowed_round([r], commits.get(r["round"], 0), real) for r in rounds]
                )
                gate.cap = max(gate.cap, min(gate.cap + 1, allowed))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _manifest(dataset: Any) -> dict[str, Any]:
    doc = manifest_doc(dataset, commit_window_rounds=30, audit_window_rounds=20)
    doc.pop("coordinator")
    # one probation round, counted in committed rounds: round 0 audits everyone (each
    # island's first commit), round 1 nobody (every island there committed in round 0)
    doc["audit"].update(rate=0.0, probation_rounds=1)
    doc["admission"] = {"answer_window_rounds": 30}  # the challenge is on by default
    doc["reward"] = {"pool_per_round": POOL, "vesting_rounds": 1}
    report = selfcheck()[0]
    doc["selfcheck_reference"] = {report.device_class: report.workload_hash}
    return doc


@pytest.mark.timeout(1200)  # eight processes train and are audited in round 0
def test_attackers_are_caught_and_never_paid(tmp_path: Path, beacon: LocalBeaconProcess) -> None:
    dataset = make_dataset(REPO / "tests" / "assets", tmp_path / "dataset")
    keys: dict[str, tuple[Path, Hotkey]] = {}
    for i, name in enumerate((*ISLANDS, "auditor", "aggregator")):
        path = tmp_path / "wallets" / "e2e" / "hotkeys" / name
        keys[name] = (path, write_key_file(bytes([0x60 + i]) * 32, path))
    ss58 = {name: key.ss58_address for name, (_, key) in keys.items()}
    sec = write_secrets(tmp_path)
    secrets, coord = sec.tokens, sec.coord
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
    common = [
        "--service-url",
        service,
        "--relay-url",
        relay,
        "--run-id",
        RUN,
        "--worker-token-file",
        str(secrets["worker"]),
        "--poll-s",
        "0.3",
        "--follow",
    ]
    try:
        with _gate(gate, beacon.chain.chain_hash_hex, service):
            fleet.hypertrain("service", "challenge", "serve", env=svc_env, sock=svc_sock)
            relay_cmd = relay_args(tmp_path, RUN, coord, beacon.chain)
            fleet.hypertrain("relay", "relay", *relay_cmd, sock=relay_sock)
            wait_servers(service, relay)
            admin = {"authorization": f"Bearer {TOKENS['admin']}"}
            r = httpx.post(
                f"{service}/admin/v1/runs", headers=admin, json={"manifest": _manifest(dataset)}
            )
            assert r.status_code == 200, r.text
            # the auditor first: it also recomputes admission challenges
            auditor = [
                "--key-file",
                str(keys["auditor"][0]),
                "--dataset-dir",
                str(tmp_path / "dataset"),
                "--coordinator",
                coord,
            ]
            fleet.hypertrain("auditor", "auditor", "run", *common, *auditor)
            tomls = {
                n: miner_toml(tmp_path, RUN, n, (service, relay), tmp_path / "dataset", 0.3)
                for n in ISLANDS
            }
            _start_islands(fleet, tomls, coord, ss58["honest-a"])  # they wait for round 0
            _join_all(tomls, coord)
            start_probation(fleet, tomls, coord, ROUND_ATTACKERS[1])
            wait_for(
                lambda: len(httpx.get(f"{service}/v1/runs/{RUN}/roster").json()) == len(ISLANDS),
                120,
                "every island admitted",
            )
            # a round's roster is who is registered when it opens: round 0 is for every
            # island (the round-1 attackers' probation), round 1 for its own attackers
            roster = {0: [ss58[n] for n in ISLANDS]}
            roster[1] = [ss58[n] for n in (*HONEST, *ROUND_ATTACKERS[1])]
            _register(service, tmp_path, 101, {h: uids[h] for h in roster[0]})
            aggregator = [
                "--key-file",
                str(keys["aggregator"][0]),
                "--state-dir",
                str(tmp_path / "agg"),
                "--admin-token-file",
                str(secrets["admin"]),
                "--dataset-dir",
                str(tmp_path / "dataset"),
                "--last-round",
                "1",
            ]
            wait_started(fleet, [*ISLANDS, *PROBATION], 300)  # they wait for round 0
            fleet.hypertrain("aggregator", "aggregator", "run", *common, *aggregator)
            names = ("service", "relay", "aggregator", "auditor", *HONEST)

            def rounds() -> list[dict[str, Any]]:
                fleet.check_alive(*names)
                got: list[dict[str, Any]] = httpx.get(f"{service}/v1/runs/{RUN}/rounds").json()
                return got

            def final(index: int) -> bool:
                got = rounds()
                return len(got) > index and got[index]["phase"] == "final"

            wait_for(lambda: rounds() and rounds()[0]["commits"] == COMMITS[0], 240, "commits")
            _register(service, tmp_path, 102, {h: uids[h] for h in roster[1]})
            assert len(rounds()) == 1  # round 1 opens after round 0's merge
            wait_for(lambda: final(1), 240, "round 1 to be final", poll_s=1)
        _check(service, ss58)
    except (AssertionError, KeyError):
        for name in fleet.procs:
            sys.stderr.write(f"--- {name}\n{fleet.tail(name, 1500)}\n")
        raise
    finally:
        fleet.stop()
        svc_sock.close()
        relay_sock.close()
        gate.close()


def _register(service: str, root: Path, block: int, uids: dict[str, int]) -> None:
    """Make exactly ``uids`` the registered hotkeys and wait until the service sees it."""
    write_metagraph(root / "metagraph.json", uids, block)
    wait_for(
        lambda: httpx.get(f"{service}/health").json()["metagraph"]["block"] == block,
        30,
        f"metagraph block {block}",
    )


def _join_all(tomls: dict[str, Path], coord: str) -> None:
    """Every island joins at once, from one process (each runs the admission workload)."""
    configs = [a for toml in tomls.values() for a in ("--config", str(toml))]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.e2e.attackers",
            "join",
            "--",
            *configs,
            "--coordinator",
            coord,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=420,  # every island runs the admission workload at once: slow when loaded
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _start_islands(fleet: Fleet, tomls: dict[str, Path], coord: str, victim: str) -> None:
    fleet.miner(
        "honest-a", "run", "--config", str(tomls["honest-a"]), "--coordinator", coord, "--follow"
    )
    fleet.miner(
        "honest-b", "run", "--config", str(tomls["honest-b"]), "--coordinator", coord, "--follow"
    )
    for name, (strategy, index) in ATTACKERS.items():
        extra = ["--victim", victim] if strategy == "copy" else []
        miner = ["run", "--config", str(tomls[name]), "--coordinator", coord, "--follow"]
        fleet.start(
            name,
            ["-m", "tests.e2e.attackers", strategy, "--round", str(index), *extra, "--", *miner],
        )


def _check(service: str, ss58: dict[str, str]) -> None:
    detail = [httpx.get(f"{service}/v1/runs/{RUN}/rounds/{i}").json() for i in (0, 1)]
    verdicts = {
        v["envelope"]["body"]["hotkey"]: v["envelope"]["body"] for v in detail[0]["verdicts"]
    }
    results = {name: verdicts[ss58[name]]["result"] for name in ISLANDS}
    assert results == {
        "honest-a": "match",
        "honest-b": "match",
        "moments": "mismatch",
        "bad-ref": "unverifiable",
        "nested": "unverifiable",
        **dict.fromkeys(ROUND_ATTACKERS[1], "match"),  # their honest probation round
    }, verdicts
    assert verdicts[ss58["moments"]]["first_bad_leaf"] == 0  # checkpoint 0 is not the start
    merge0, merge1 = (d["merge"]["body"] for d in detail)
    paid0 = (*HONEST, *ROUND_ATTACKERS[1])  # who did round 0's work honestly
    assert sorted(merge0["included"]) == sorted(ss58[n] for n in paid0), merge0
    assert set(merge0["excluded"]) == {ss58[n] for n in ROUND_ATTACKERS[0]}, merge0
    # round 1 audits only the two holders of one update: probation was served
    audited1 = sorted(a["body"]["hotkey"] for a in detail[1]["assignments"])
    assert audited1 == sorted([ss58["honest-a"], ss58["copy"]]), audited1
    verdicts1 = {
        v["envelope"]["body"]["hotkey"]: v["envelope"]["body"]["result"]
        for v in detail[1]["verdicts"]
    }
    assert verdicts1[ss58["honest-a"]] == "match", verdicts1
    assert verdicts1[ss58["copy"]] in ("mismatch", "unverifiable"), verdicts1
    assert sorted(merge1["included"]) == sorted(ss58[n] for n in HONEST), merge1
    assert merge1["excluded"] == {
        ss58["x1000"]: "norm_outlier",
        ss58["copy"]: "audit_mismatch",
        ss58["ghost"]: "missing_blob",
    }, merge1
    # the ×1000 update did not move the model: held-out loss stays where round 0 left it
    assert merge1["eval_loss"] < merge0["eval_loss"] + 0.5, (merge0, merge1)
    roster = {row["hotkey"]: row for row in httpx.get(f"{service}/v1/runs/{RUN}/roster").json()}
    earned = {
        n: sum(roster[ss58[n]][k] for k in ("escrow", "held", "vested", "paid")) for n in ISLANDS
    }
    # round 0's pool goes to the five islands that did its work, round 1's to the two
    # honest ones: no attack earns anything; x1000 and ghost keep only their honest
    # round 0 (the ghost's missing blob leaves it unpaid: a tape's word burns nothing),
    # the copy's fault burns its round 0 too
    share0, share1 = POOL // len(paid0), POOL // len(HONEST)
    assert earned == (
        dict.fromkeys(HONEST, share0 + share1)
        | dict.fromkeys(ROUND_ATTACKERS[0], 0)
        | {"x1000": share0, "copy": 0, "ghost": share0}
    ), earned
    assert roster[ss58["ghost"]]["burned"] == 0, roster[ss58["ghost"]]
    assert roster[ss58["copy"]]["burned"] == share0, roster[ss58["copy"]]
    internal = {
        "authorization": f"Bearer {TOKENS['internal']}",
        "x-platform-challenge-slug": "hypertrain",
    }
    r = httpx.get(f"{service}/internal/v1/get_weights", params={"epoch": 1}, headers=internal)
    assert r.status_code == 200, r.text
    weights = r.json()["weights"]
    assert all(weights.get(ss58[n], 0) == 0 for n in ROUND_ATTACKERS[0]), weights
    assert all(weights.get(ss58[n], 0) <= share0 for n in ("x1000", "copy", "ghost")), weights
    assert all(weights.get(ss58[n], 0) > 0 for n in HONEST), weights


def start_probation(fleet: Fleet, tomls: dict[str, Path], coord: str, names: Iterable[str]) -> None:
    """Each of ``names`` serves its probation: its key trains round 0 honestly, in a
    process of its own (started after the joins, which it would only slow down)."""
    for name in names:
        miner = ["run", "--config", str(tomls[name]), "--coordinator", coord, "--follow"]
        honest = ["-m", "tests.e2e.attackers", "honest", "--round", "0", "--", *miner]
        fleet.start(f"{name}-probation", honest)
