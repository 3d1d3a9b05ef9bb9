"""Starting a devnet's processes: a fresh run, or a stopped one resumed from its state.

:class:`Devnet` is what the orchestrator knows of a running devnet; :func:`start` brings
every role up (the beacon, the service, the relay, the auditor or jurors, the witness,
the islands, the aggregator and the data-parallel baseline), either creating the run
(manifest, warm start, joins) or going on with the one in the state directory
(:mod:`hypertrain.devnet.resume`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch
from rich.console import Console

from hypertrain.api.client import ChallengeClient
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.devnet import chaos, honeypots, keys, network, resume, roles
from hypertrain.devnet.baseline import BaselineStore, BaselineThread
from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.procs import Child, Supervisor
from hypertrain.protocol.honeypots import HoneypotList
from hypertrain.protocol.manifest import RunManifest


@dataclass
class Devnet:
    cfg: DevnetConfig
    console: Console
    sup: Supervisor
    state: Path
    url: str = ""
    relay: str = ""
    secrets: keys.Secrets | None = None
    manifest: RunManifest | None = None
    strategy: str = ""
    doc: dict[str, Any] | None = None
    finished: set[int] = field(default_factory=set)  # rounds already reported
    finished_at: dict[int, float] = field(default_factory=dict)  # when each was seen final
    dataset: Path | None = None
    honeypots: HoneypotList | None = None  # committed in the manifest, revealed at the end
    baseline: BaselineThread | None = None  # data-parallel on the run's tokens, beside it
    chaos: chaos.ChaosLoop | None = None  # --chaos-every: kills and restarts roles

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.url}{path}", timeout=10)
        response.raise_for_status()
        return response.json()


def start(net: Devnet, dataset: Path, session: resume.Session | None = None) -> None:
    """Start every process of the run; ``session``: go on with the stopped run kept in the
    state directory (:mod:`hypertrain.devnet.resume`) instead of creating one."""
    cfg, sup, state = net.cfg, net.sup, net.state
    fresh = session is None
    sec = keys.generate(state / "secrets", cfg.islands, cfg.standby_jurors) if fresh else (
        keys.load(state / "secrets"))  # fmt: skip
    net.secrets = sec
    beacon = network.start_beacon(sup, state / "beacon", cfg.beacon_period_s)
    port = cfg.port if session is None else session.service_port
    net.url = network.start_service(sup, state / "service", port, sec, beacon)
    relay_port = 0 if session is None else session.relay_port
    net.relay = network.start_relay(sup, state / "relay", roles.RUN_ID, sec, beacon, relay_port)
    warm = create_run(net, dataset) if session is None else None
    if session is not None:
        net.strategy, net.honeypots = session.strategy, session.honeypot_list()
        net.manifest = ChallengeClient(net.url).manifest(roles.RUN_ID)
    islands = state / "islands"
    args = [roles.miner_args(m, net.url, net.relay, dataset, islands, sec.coordinator.ss58)
            for m in sec.islands]  # fmt: skip
    # The auditor first: it recomputes the admission challenges the joins wait for.
    start_auditors(net, dataset)
    sup.start("witness", roles.witness_cmd(sec, net.url, net.relay, state / "witness"))
    if fresh:
        join_islands(net, args)
    honest = cfg.honeypot_honest_rounds
    last = sec.islands[-1]  # the honeypot
    trainers = [sup.start(m.name, roles.honeypot_cmd(a, net.strategy, honest) if m == last
                          else roles.island_cmd(a))
                for m, a in zip(sec.islands, args, strict=True)]  # fmt: skip
    if cfg.rollback:  # the lied-about island disputes what its own replay refutes
        sup.start(f"{sec.islands[0].name}-watch", roles.watch_cmd(args[0]))
    if fresh:
        # The aggregator opens round 0 at once, and the commit window starts then:
        # start it only when every island is up and waiting for that round.
        for child in trainers:
            child.wait_for_line(roles.ISLAND_READY, timeout_s=300)
        genesis = None if warm is None else finish_warm_start(net, warm)
    else:
        genesis = state / "genesis.model" if session and session.warm_start else None
    sup.start(
        "aggregator",
        roles.aggregator_cmd(cfg, sec, net.url, net.relay, state / "aggregator", dataset, genesis),
    )
    if fresh:
        assert net.honeypots is not None
        session = resume.Session(
            service_port=int(net.url.rsplit(":", 1)[1]),
            relay_port=int(net.relay.rsplit(":", 1)[1]),
            strategy=net.strategy,
            honeypots=net.honeypots.model_dump(mode="json"),
            warm_start=genesis is not None,
        )
        resume.save(state, session)
    if cfg.baseline:
        net.baseline = start_baseline(net, dataset)


def create_run(net: Devnet, dataset: Path) -> Child | None:
    """Post the run's manifest (committing to the honeypot list) and start the warm start
    (None: the run has none)."""
    cfg, sec = net.cfg, net.secrets
    assert sec is not None
    liar = sec.auditor.ss58 if cfg.rollback else ""
    net.honeypots = honeypots.honeypot_list(
        sec.islands[-1].ss58, net.strategy, liar, honest_rounds=cfg.honeypot_honest_rounds
    )
    doc = roles.manifest_doc(cfg, dataset, sec.coordinator.ss58)
    doc = honeypots.committed(doc, net.honeypots, reveal_round=cfg.rounds - 1)
    token = sec.token(sec.admin_token)
    r = httpx.post(f"{net.url}/admin/v1/runs", json={"manifest": doc},
                   headers=auth_headers(token), timeout=30)  # fmt: skip
    if not r.is_success:
        raise DevnetError(f"the service refused the run manifest: {r.text}")
    net.manifest = RunManifest.model_validate(doc)
    return start_warm_start(net, doc, dataset)


def join_islands(net: Devnet, args: list[list[str]]) -> None:
    """Every island answers its admission challenge, concurrently."""
    assert net.secrets is not None
    budgets = net.cfg.budgets  # one per island, the honeypot last
    joins = [
        net.sup.start(f"join-{m.name}", roles.join_cmd(a, mb))
        for m, a, mb in zip(net.secrets.islands, args, budgets, strict=True)
    ]
    for join in joins:
        if join.process.wait(timeout=300) != 0:
            raise DevnetError(f"{join.name} failed:\n{join.tail()}")


def start_baseline(net: Devnet, dataset: Path) -> BaselineThread:
    """Data-parallel training on each final round's merged tokens, in this process, on one
    thread of torch (the islands keep the other core); it posts its curve to the
    dashboard with the admin token."""
    assert net.manifest is not None and net.secrets is not None
    torch.set_num_threads(1)
    data = Dataset(dataset / DESCRIPTOR_NAME, expected_sha256=net.manifest.data.descriptor_sha256)
    store = BaselineStore(net.state / "baseline", net.manifest)
    admin = net.secrets.token(net.secrets.admin_token)
    thread = BaselineThread(net.url, net.manifest, data, store, admin_token=admin)
    thread.start()
    return thread


def start_warm_start(net: Devnet, doc: dict[str, Any], dataset: Path) -> Child | None:
    """The operator's warm start of round 0's model, beside the joins (None: the run has
    no warm start)."""
    if "warm_start" not in doc:
        return None
    path = net.state / "manifest.json"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    out = net.state / "genesis.model"
    return net.sup.start("warm-start", roles.warm_start_cmd(path, dataset, out))


def finish_warm_start(net: Devnet, warm: Child) -> Path:
    """Wait for the warm start; round 0's model file."""
    if warm.process.wait(timeout=600) != 0:
        raise DevnetError(f"the warm start failed:\n{warm.tail()}")
    return net.state / "genesis.model"


def start_auditors(net: Devnet, dataset: Path) -> None:
    """The auditor; in the rollback scenario the lying honeypot auditor and the standby
    jurors instead (docs/devnet.md, "Rollbacks")."""
    assert net.secrets is not None
    sec, sup = net.secrets, net.sup
    if not net.cfg.rollback:
        sup.start("auditor", roles.auditor_cmd(sec, net.url, net.relay, dataset))
        return
    sup.start("auditor", roles.lying_auditor_cmd(net.cfg, sec, net.url, net.relay, dataset))
    for juror in sec.jurors:
        sup.start(juror.name, roles.juror_cmd(sec, juror, net.url, net.relay, dataset))


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Platform-Challenge-Slug": "hypertrain"}
