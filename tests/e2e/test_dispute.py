"""Disputes end to end as real processes: who may contest what, and how a game ends.

Local beacon, challenge service, relay, aggregator, an auditor, a referee and one island
(``run --follow`` and ``watch --follow``) run as separate processes for one round:

* ``lying-auditor``: a honeypot auditor flips its verdict on an honest island. The
  island's own replay refutes the verdict, so ``watch --follow`` disputes on its own;
  the auditor's honest answers reach the island's leaf and the verdict is overturned. A
  second, honest auditor's re-audit agrees with the island, so the liar is barred and
  the round settles paying the island (one lost game alone would only hold the reward).
* ``cheating-island``: the island perturbs one operation (:mod:`hypertrain.honeypot.island`),
  the honest auditor's verdict names segment 0, the island's watch disputes it, the game
  pins the operation and the referee upholds: the island is not paid.
* ``no-referee``: the same cheat under ``dispute.referees: []``: nobody can rule, so the
  deterministic fallback upholds the verdict once the referee stage and its extensions
  expire, within ``2 x clock_rounds + referee_rounds x (1 + referee_extensions)`` beacon
  rounds of the opening (docs/mechanism.md, "Deadlines and their bound").
* ``honest-segment``: the same cheat, but instead of its watch the island disputes the
  verdict on its other audited segment, the honest one (``dispute-elsewhere`` of
  :mod:`tests.e2e.attackers`, a real envelope signed with its key). A dispute is about
  the first difference only, so the service refuses it (``not_first_difference``); the
  verdict stands undisputed, the island is faulted and unpaid, and the auditor keeps its
  standing (not barred, its verdict counts, nothing re-assigned).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.beacon import LocalBeaconProcess
from hypertrain.miner.admission import selfcheck
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
from hypertrain.protocol.identity import Hotkey, write_key_file
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


def _manifest(dataset: Any, dispute: dict[str, Any], honeypots: HoneypotList) -> dict[str, Any]:
    doc = manifest_doc(
        dataset, commit_window_rounds=40, audit_window_rounds=30, dispute_window_rounds=30
    )
    doc.pop("coordinator")
    report = selfcheck()[0]
    doc["selfcheck_reference"] = {report.device_class: report.workload_hash}
    doc["admission"] = {"answer_window_rounds": 30}  # the challenge is on by default
    doc["dispute"] = dispute
    doc["honeypots"] = {"commitment": commitment(honeypots), "reveal_round": 0}
    return doc


PERTURB = (1, 1, 5)  # global step 1 (segment 0), mb0.layers.1, its sixth operation
CASES = ("lying-auditor", "cheating-island", "no-referee", "honest-segment")
# Every message is due ``answer_rounds`` after its phase opens, from a clock of
# ``clock_rounds``: on a loaded 2-core machine one replay of the island's segment can take
# a minute, so the game gets that much room (it is only slower there, never decided
# otherwise; the deadlines are upper bounds a responsive party never meets).
RULES: dict[str, Any] = {"bond": 0, "answer_rounds": 60, "clock_rounds": 150, "referee_rounds": 20}
# the referee-less run: one extension, so the fallback's wait stays short
NO_REFEREE: dict[str, Any] = {**RULES, "referee_extensions": 1, "referees": []}
FALLBACK = ("no referee ruled after 1 extensions", "nobody supplied the contested operation")


@dataclass(frozen=True)
class _Net:
    """One test's network: its processes, addresses, keys and the island's config."""

    root: Path
    fleet: Fleet
    service: str
    relay: str
    keys: dict[str, tuple[Path, Hotkey]]
    tokens: dict[str, Path]
    coord: str
    toml: Path

    def ss58(self, name: str) -> str:
        return self.keys[name][1].ss58_address

    def common(self) -> list[str]:
        """The arguments every worker process takes."""
        return [
            *("--service-url", self.service, "--relay-url", self.relay, "--run-id", RUN),
            *("--worker-token-file", str(self.tokens["worker"])),
        ]

    def auditor(self, name: str, module: str = "hypertrain.cli") -> None:
        command = [] if module != "hypertrain.cli" else ["auditor", "run", "--follow"]
        self.fleet.start(
            name,
            [
                "-m", module, *command, *self.common(),
                "--key-file", str(self.keys[name][0]),
                "--dataset-dir", str(self.root / "dataset"),
                "--coordinator", self.coord, "--poll-s", "0.5",
            ],
        )  # fmt: skip


def _keys(root: Path) -> dict[str, tuple[Path, Hotkey]]:
    keys = {}
    for i, name in enumerate((ISLAND, "auditor", "aggregator", "referee", "auditor2")):
        path = root / "wallets" / "e2e" / "hotkeys" / name
        keys[name] = (path, write_key_file(bytes([0x50 + i]) * 32, path))
    return keys


def _servers(root: Path, beacon: LocalBeaconProcess, fleet: Fleet) -> _Net:
    """Keys, metagraph and allow list; the service and relay, both answering."""
    keys = _keys(root)
    sec = write_secrets(root)
    island = keys[ISLAND][1].ss58_address
    workers = [keys[n][1].ss58_address for n in ("auditor", "aggregator", "auditor2")]
    write_metagraph(root / "metagraph.json", {island: 0})
    (root / "allow.json").write_text(json.dumps([island, *workers]))
    svc_sock, relay_sock = listener(), listener()
    service = f"http://127.0.0.1:{port_of(svc_sock)}"
    relay = f"http://127.0.0.1:{port_of(relay_sock)}"
    env = service_env(root, beacon.url, sec, workers, HYPERTRAIN_AGGREGATOR_HOTKEYS=workers[1])
    fleet.hypertrain("service", "challenge", "serve", env=env, sock=svc_sock)
    fleet.hypertrain(
        "relay", "relay", *relay_args(root, RUN, sec.coord, beacon.chain), sock=relay_sock
    )
    wait_servers(service, relay)
    toml = miner_toml(root, RUN, ISLAND, (service, relay), root / "dataset")
    return _Net(root, fleet, service, relay, keys, sec.tokens, sec.coord, toml)


def _join(net: _Net) -> None:
    """The island joins (the auditor recomputes the admission challenge it waits for)."""
    done = subprocess.run(
        [sys.executable, "-m", "hypertrain.miner.cli", "join", "--config", str(net.toml),
         "--coordinator", net.coord],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _islands(net: _Net, case: str) -> list[str]:
    """The island's ``run`` and its ``watch`` (or, for ``honest-segment``, the disputer)."""
    miner = ["-m", "hypertrain.miner.cli"]
    if case != "lying-auditor":
        where = ":".join(str(x) for x in PERTURB)
        miner = ["-m", "hypertrain.honeypot.island", "--perturb", where, "--"]
    config = ["--config", str(net.toml), "--coordinator", net.coord]
    net.fleet.start("island", [*miner, "run", *config, "--follow"])
    if case == "honest-segment":  # one opening, then it exits: no --follow
        attacker = ["-m", "tests.e2e.attackers", "dispute-elsewhere", "--round", "0", "--"]
        net.fleet.start("disputer", [*attacker, "watch", *config])
        return ["island"]
    net.fleet.start("watch", [*miner, "watch", *config, "--follow"])
    return ["island", "watch"]


def _referee(net: _Net) -> None:
    net.fleet.hypertrain(
        "referee", "referee", "serve", "--service-url", net.service, "--run-id", RUN,
        "--key-file", str(net.keys["referee"][0]), "--coordinator", net.coord, "--poll-s", "0.5",
    )  # fmt: skip


def _aggregator(net: _Net) -> None:
    """One round: rounds close on work, so more would race the game."""
    net.fleet.hypertrain(
        "aggregator", "aggregator", "run", *net.common(),
        "--key-file", str(net.keys["aggregator"][0]), "--state-dir", str(net.root / "agg"),
        "--admin-token-file", str(net.tokens["admin"]), "--follow", "--poll-s", "0.5",
        "--last-round", "0",
    )  # fmt: skip


def _dispute_rules(case: str, referee: str) -> dict[str, Any]:
    if case == "no-referee":
        return dict(NO_REFEREE)
    return {**RULES, "referees": [referee]}


@pytest.mark.timeout(1200)  # a loaded machine replays slowly; every wait below is bounded
@pytest.mark.parametrize("case", CASES)
def test_dispute_decided_through_watch_follow(
    tmp_path: Path, beacon: LocalBeaconProcess, case: str
) -> None:
    """lying-auditor: the island wins and is paid; the other cases: the island loses."""
    dataset = make_dataset(REPO / "tests" / "assets", tmp_path / "dataset")
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        net = _servers(tmp_path, beacon, fleet)
        admin = {"authorization": f"Bearer {TOKENS['admin']}"}
        honeypots = _honeypots(net.ss58(ISLAND), net.ss58("auditor"))
        doc = _manifest(dataset, _dispute_rules(case, net.ss58("referee")), honeypots)
        r = httpx.post(f"{net.service}/admin/v1/runs", headers=admin, json={"manifest": doc})
        assert r.status_code == 200, r.text
        lying = case == "lying-auditor"
        net.auditor("auditor", "hypertrain.honeypot.auditor" if lying else "hypertrain.cli")
        if lying:  # the independent re-audit of the disputed verdict
            net.auditor("auditor2")
        _join(net)
        names = ["service", "relay", "auditor"]
        if case in ("lying-auditor", "cheating-island"):
            _referee(net)
            names.append("referee")
        names += _islands(net, case)
        wait_started(fleet, ["island"], 120)  # then round 0 opens
        _aggregator(net)
        names.append("aggregator")

        def round_final() -> bool:
            fleet.check_alive(*names)
            rounds = httpx.get(f"{net.service}/v1/runs/{RUN}/rounds").json()
            return bool(rounds) and rounds[0]["phase"] == "final"

        wait_for(round_final, 900, "round 0 to be final", poll_s=1)
        if case == "honest-segment":
            _check_refused(net)
            return
        _check_decided(net, case, doc["dispute"], admin, honeypots)
    except AssertionError:
        for name in fleet.procs:
            sys.stderr.write(f"--- {name}\n{fleet.tail(name, 2500)}\n")
        raise
    finally:
        fleet.stop()


def _roster(net: _Net) -> dict[str, dict[str, Any]]:
    rows = httpx.get(f"{net.service}/v1/runs/{RUN}/roster").json()
    return {row["hotkey"]: row for row in rows}


def _check_decided(
    net: _Net, case: str, rules: dict[str, Any], admin: dict[str, str], honeypots: HoneypotList
) -> None:
    """The island's watch disputed round 0's verdict and the game was decided."""
    island = net.ss58(ISLAND)
    disputes = httpx.get(f"{net.service}/v1/disputes", params={"run_id": RUN}).json()
    # rounds advance on work, so later rounds (and their disputes) may already be under way
    first = next(d for d in disputes if d["round"] == 0)
    game = first["game"]
    assert first["hotkey"] == island and first["auditor"] == net.ss58("auditor")
    roster = _roster(net)
    events = [e["event"] for e in net.fleet.events("watch")]
    assert "dispute_opened" in events and "dispute_answer" in events, events
    if case == "lying-auditor":
        assert game["outcome"] == "overturned", game
        assert [s["level"] for s in game["steps"]][-1] == "decided", game
        faulty = httpx.get(f"{net.service}/v1/runs/{RUN}/reassigned").json()
        assert all(f["hotkey"] != island for f in faulty), faulty  # re-audited
        assert roster[island]["escrow"] > 0, roster[island]
        _check_honeypots(net.service, admin, honeypots)
        return
    # the game pins the perturbed step, layer and operation, then the verdict is upheld
    assert (game["segment"], game["step"]) == (0, PERTURB[0]), game
    assert (game["section"], game["op_index"]) == PERTURB[1:], game
    assert game["outcome"] == "upheld", game
    assert roster[island]["escrow"] == 0, roster[island]
    if case == "cheating-island":
        assert "referee" in game["reason"], game
        return
    # no referee: the deadline decides, within the bound the manifest's rules give
    assert game["reason"].startswith(FALLBACK), game
    steps = game["steps"]
    assert "referee" in [s["level"] for s in steps] and steps[-1]["actor"] == "deadline", steps
    bound = 2 * rules["clock_rounds"] + rules["referee_rounds"] * (1 + rules["referee_extensions"])
    assert bound == 340 and game["rules"]["referee_extensions"] == 1, game["rules"]
    assert first["decided_beacon_round"] - first["opened_beacon_round"] <= bound, first


def _check_refused(net: _Net) -> None:
    """The dispute of the honest segment was refused; the verdict stands, the auditor too."""
    island, auditor = net.ss58(ISLAND), net.ss58("auditor")
    assert net.fleet.procs["disputer"].wait(timeout=60) == 0, net.fleet.tail("disputer")
    (said,) = [e for e in net.fleet.events("disputer") if e["event"].startswith("dispute_")]
    assert (said["event"], said["refusal"]) == ("dispute_refused", "not_first_difference"), said
    assert said["first_bad_leaf"] == 1 and said["segment"] == 1, said  # segment 0 differs
    assert httpx.get(f"{net.service}/v1/disputes", params={"run_id": RUN}).json() == []
    detail = httpx.get(f"{net.service}/v1/runs/{RUN}/rounds/0").json()
    (verdict,) = [v["envelope"]["body"] for v in detail["verdicts"]]
    assert (verdict["hotkey"], verdict["result"], verdict["check"]) == (
        island, "mismatch", "segment",
    ), verdict  # fmt: skip
    faults = httpx.get(f"{net.service}/v1/runs/{RUN}/faults").json()
    assert [(f["round"], f["hotkey"]) for f in faults] == [(0, island)], faults
    row = _roster(net)[island]
    assert (row["accused_rounds"], row["proven_faults"]) == (1, 1), row
    assert sum(row[k] for k in ("escrow", "held", "vested", "paid")) == 0, row
    # the auditor is not barred: nothing re-assigned, its verdict counts
    assert httpx.get(f"{net.service}/v1/runs/{RUN}/reassigned").json() == []
    audits = httpx.get(f"{net.service}/v1/runs/{RUN}/dashboard").json()["audits"]
    judged = [v for a in audits if a["hotkey"] == island for v in a["verdicts"]]
    assert [(v["auditor"], v["counts"]) for v in judged] == [(auditor, True)], audits


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
            "--service-url",
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
    # the dispute overturned the flag: a dispute won, not a false positive
    assert (honest["false_positives"], honest["disputes_won"]) == ("0", "1"), done.stdout
    assert rows[("auditor", "lying")]["disputes_lost"] == "1", done.stdout
