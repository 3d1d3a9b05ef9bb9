"""Run a whole devnet: start every process, follow the rounds, report, stop cleanly.

Under ``--state-dir`` (default ``.devnet``): ``state/`` the service, relay, beacon, island
and worker directories and every log (removed at a clean exit unless ``--keep``; kept
when the run fails, beside a partial ``report.json`` marked failed with the reason);
``model/`` the exported model; ``report.json`` and ``report.md`` the run report (an earlier
run's removed at start). Ctrl-C stops every child and still writes what is known."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch
from rich.console import Console
from rich.live import Live

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.devnet import (
    chaos,
    evaluate,
    honeypots,
    keys,
    lock,
    network,
    prep,
    report,
    roles,
    rollbacks,
    utilisation,
    view,
)
from hypertrain.devnet.baseline import BaselineStore, BaselineThread
from hypertrain.devnet.config import (
    HONEYPOT_STRATEGIES,
    PER_ISLAND_LAYOUTS_SUPPORTED,
    ROLLBACK_STRATEGIES,
    DevnetConfig,
)
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.procs import Child, Supervisor, hypertrain_cmd
from hypertrain.protocol.honeypots import HoneypotList
from hypertrain.protocol.manifest import RunManifest

log = logging.getLogger(__name__)
SERVING = ("beacon", "service", "relay")


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


def start(net: Devnet, dataset: Path) -> None:
    cfg, sup, state = net.cfg, net.sup, net.state
    net.secrets = sec = keys.generate(state / "secrets", cfg.islands, cfg.standby_jurors)
    beacon = network.start_beacon(sup, state / "beacon", cfg.beacon_period_s)
    net.url = network.start_service(sup, state / "service", cfg.port, sec, beacon)
    net.relay = network.start_relay(sup, state / "relay", roles.RUN_ID, sec, beacon)
    liar = sec.auditor.ss58 if cfg.rollback else ""
    net.honeypots = honeypots.honeypot_list(
        sec.islands[-1].ss58, net.strategy, liar, honest_rounds=cfg.honeypot_honest_rounds
    )
    doc = roles.manifest_doc(cfg, dataset, sec.coordinator.ss58)
    doc = honeypots.committed(doc, net.honeypots, reveal_round=cfg.rounds - 1)
    token = sec.token(sec.admin_token)
    r = httpx.post(f"{net.url}/admin/v1/runs", json={"manifest": doc},
                   headers=_auth(token), timeout=30)  # fmt: skip
    if not r.is_success:
        raise DevnetError(f"the service refused the run manifest: {r.text}")
    net.manifest = RunManifest.model_validate(doc)
    warm = start_warm_start(net, doc, dataset)
    islands = state / "islands"
    args = [roles.miner_args(m, net.url, net.relay, dataset, islands, sec.coordinator.ss58)
            for m in sec.islands]  # fmt: skip
    budgets = cfg.budgets  # one per island, the honeypot last
    # The auditor first: it recomputes the admission challenges the joins wait for.
    start_auditors(net, dataset)
    sup.start("witness", roles.witness_cmd(sec, net.url, net.relay, state / "witness"))
    joins = [
        sup.start(f"join-{m.name}", roles.join_cmd(a, mb))
        for m, a, mb in zip(sec.islands, args, budgets, strict=True)
    ]
    for join in joins:  # concurrently: each answers its admission challenge
        if join.process.wait(timeout=300) != 0:
            raise DevnetError(f"{join.name} failed:\n{join.tail()}")
    honest = cfg.honeypot_honest_rounds
    last = sec.islands[-1]  # the honeypot
    trainers = [sup.start(m.name, roles.honeypot_cmd(a, net.strategy, honest) if m == last
                          else roles.island_cmd(a))
                for m, a in zip(sec.islands, args, strict=True)]  # fmt: skip
    if cfg.rollback:  # the lied-about island disputes what its own replay refutes
        sup.start(f"{sec.islands[0].name}-watch", roles.watch_cmd(args[0]))
    # The aggregator opens round 0 at once, and the commit window starts then:
    # start it only when every island is up and waiting for that round.
    for child in trainers:
        child.wait_for_line(roles.ISLAND_READY, timeout_s=300)
    genesis = None if warm is None else finish_warm_start(net, warm)
    sup.start(
        "aggregator",
        roles.aggregator_cmd(cfg, sec, net.url, net.relay, state / "aggregator", dataset, genesis),
    )
    if cfg.baseline:
        net.baseline = start_baseline(net, dataset)


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


def record_new_rounds(net: Devnet) -> None:
    """Note the held-out loss of every newly final round (posted by the aggregator).

    Without a terminal (CI, a pipe) the live view is off, so each round gets one line.
    """
    assert net.doc is not None
    for r in net.doc["rounds"]:
        if r["phase"] != "final" or r["round"] in net.finished:
            continue
        net.finished.add(r["round"])
        net.finished_at[r["round"]] = time.time()
        if not net.console.is_terminal:
            net.console.print(view.round_line(r, net.cfg.rounds), soft_wrap=True)


def follow(net: Devnet) -> None:
    """Poll until R rounds are final, redrawing the live view."""
    deadline = time.monotonic() + net.cfg.timeout_s
    joins = [c.name for c in net.sup.children if c.name.startswith("join-")]
    live = Live(console=net.console, refresh_per_second=2, transient=False)
    with live if net.console.is_terminal else contextlib.nullcontext():
        while True:
            net.sup.check(ignore=["aggregator", *joins, *_may_leave(net.cfg)])
            with contextlib.suppress(httpx.HTTPError):
                net.doc = net.get(f"/v1/runs/{roles.RUN_ID}/dashboard")
                record_new_rounds(net)
                if net.chaos is not None:
                    net.chaos.step(net.sup, chaos.newest_round(net.doc))
            if net.console.is_terminal:
                live.update(view.live_view(net.doc, net.cfg.rounds, dashboard_url(net)))
            if net.doc and _finished(net.doc) >= net.cfg.rounds and _rollbacks_done(net):
                return
            if time.monotonic() > deadline:
                raise DevnetError(f"the run did not finish {net.cfg.rounds} rounds in time")
            time.sleep(1.0)


def _may_leave(cfg: DevnetConfig) -> list[str]:
    """Children whose exit is part of the run: the rollback scenario's lying auditor stops
    once the service bars it (its verdicts are refused, 403, so it has nothing to do)."""
    return ["auditor"] if cfg.rollback else []


def _rollbacks_done(net: Devnet) -> bool:
    """No proven fault still waits for the aggregator's correction (a rollback in flight
    is finished before the workers stop, so the report shows it corrected)."""
    try:
        return not rollbacks.rollback_pending(net.url, roles.RUN_ID)
    except ServiceError:
        return False  # asked again at the next poll


def final_model(net: Devnet) -> Any:
    """Parameters of the last merged model as it stands (a rollback's correction, if
    any, else the merge), fetched from the relay and hash-checked."""
    assert net.doc is not None and net.manifest is not None
    merged = [r for r in net.doc["rounds"] if r["new_model_sha256"]]
    if not merged:
        return None
    raw = net.get(f"/v1/runs/{roles.RUN_ID}/rounds/{merged[-1]['round']}")
    tape = RoundDetail.model_validate(raw).current_merge()
    assert tape is not None  # the round has a merge
    return evaluate.fetch_model(tape.new_model_url, tape.new_model_sha256, net.manifest.model)


def dashboard_url(net: Devnet) -> str:
    """The dashboard of this devnet's run (its total comes from the manifest)."""
    return f"{net.url}/dashboard/?run={roles.RUN_ID}"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Platform-Challenge-Slug": "hypertrain"}


def _finished(doc: dict[str, Any]) -> int:
    return sum(1 for r in doc["rounds"] if r["phase"] == "final")


def conclude(net: Devnet) -> dict[str, Any]:
    """Stop the workers, then weights, ledger check, export and the report."""
    assert net.secrets is not None and net.doc is not None and net.manifest is not None
    net.sup.stop_all(keep=SERVING)
    baseline = None if net.baseline is None else net.baseline.finish(timeout_s=1800)
    if net.honeypots is not None:  # every round is final: the list may be revealed now
        admin = net.secrets.token(net.secrets.admin_token)
        honeypots.reveal(net.url, roles.RUN_ID, admin, net.honeypots)
    token = net.secrets.token(net.secrets.internal_token)
    w = httpx.get(f"{net.url}/internal/v1/get_weights", params={"epoch": 1},
                  headers=_auth(token), timeout=30)  # fmt: skip
    weights = w.json() if w.is_success else {"error": w.text}
    net.doc = net.get(f"/v1/runs/{roles.RUN_ID}/dashboard")  # after the payout, as shown
    params = final_model(net)
    verify = subprocess.run(
        hypertrain_cmd(
            "ledger", "verify", "--state-dir", str(net.state / "service"), "--run", roles.RUN_ID
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    journal = subprocess.run(
        hypertrain_cmd(
            *("ledger", "export", "--state-dir", str(net.state / "service")),
            *("--out", "-", "--run", roles.RUN_ID),
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    model_dir = net.cfg.state_dir / "model"
    shutil.rmtree(model_dir, ignore_errors=True)
    exported, sample = None, ""
    if params is not None:
        exported = str(evaluate.export_final(params, net.manifest.model, model_dir, net.dataset))
        try:
            sample = evaluate.sample_text(model_dir)
        except (OSError, ValueError, RuntimeError) as exc:
            sample = f"(no sample: {exc})"
    return report.build_report(
        net.doc,
        net.secrets,
        strategy=net.strategy,
        weights=weights,
        ledger_verified=verify.returncode == 0,
        model_export=exported,
        children_left=-1,
        layouts=net.cfg.island_layouts(),
        layouts_applied=PER_ISLAND_LAYOUTS_SUPPORTED,
        utilisation=island_utilisation(net),
        sample=sample,
        honest_rounds=net.cfg.honeypot_honest_rounds,
        journal=report.read_journal(journal.stdout) if journal.returncode == 0 else [],
        rollbacks=rollbacks.read_rollbacks(
            net.url, roles.RUN_ID, {m.ss58: m.name for m in net.secrets.islands}
        ),
        scenario=net.cfg.scenario,
        warm_start=report.warm_start_row(net.manifest, len(net.secrets.islands)),
        baseline=baseline,
    )


def island_utilisation(net: Devnet) -> dict[str, Any]:
    """Compute time over round wall time, from the islands' own event lines."""
    assert net.secrets is not None and net.doc is not None
    names = {m.name for m in net.secrets.islands}
    compute = {
        c.name: utilisation.compute_seconds(c.tail(1 << 26).splitlines())
        for c in net.sup.children
        if c.name in names
    }
    walls = utilisation.round_walls(net.doc["rounds"], net.finished_at)
    return utilisation.utilisation(walls, compute)


def run_devnet(cfg: DevnetConfig, console: Console | None = None) -> int:
    """The whole devnet; returns the exit code (0 = every round done and reported).

    It holds its state directory's lock from before ``state/`` is cleared until after it
    is removed (:mod:`hypertrain.devnet.lock`): a second devnet on the same
    ``--state-dir`` fails at once, naming this one's pid, and touches nothing."""
    with lock.state_lock(cfg.state_dir):
        return _run_locked(cfg, console or Console())


def _run_locked(cfg: DevnetConfig, console: Console) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    state, path = cfg.state_dir / "state", cfg.report or cfg.state_dir / "report.json"
    shutil.rmtree(state, ignore_errors=True)
    report.clear_reports(path)  # an earlier run's report never looks like this run's
    net = Devnet(cfg, console, Supervisor(state / "logs"), state)
    choices = ROLLBACK_STRATEGIES if cfg.rollback else HONEYPOT_STRATEGIES
    net.strategy = cfg.honeypot or random.SystemRandom().choice(choices)
    net.chaos = chaos.loop_for(cfg.chaos_every_rounds, cfg.chaos_seed)  # None: no chaos
    result: dict[str, Any] | None = None
    code, failed = 1, None
    try:
        corpus = cfg.corpus or prep.default_corpus()
        dataset = prep.prepared_dataset(cfg.cache_dir, corpus, cfg.vocab_size, cfg.seq_len)
        net.dataset = dataset
        start(net, dataset)
        console.print(f"dashboard: {dashboard_url(net)}")
        follow(net)
        result = conclude(net)
        if net.chaos is not None:
            result["chaos"] = net.chaos.report()
        console.print(view.summary_table(result))
        code = 0
        if not cfg.exit_when_done:  # the report now (children_left: -1, still up) and at exit
            console.print(f"report: {path} and {report.write_report(result, path)}")
            console.print(f"dashboard stays up at {dashboard_url(net)} (Ctrl-C to stop)")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        console.print("interrupted: stopping every process")
        code = 130 if result is None else 0
    except Exception as exc:  # a partial report with the reason, the logs kept; then raised
        failed = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        net.sup.stop_all()
        left = net.sup.children_left()
        if result is not None:
            result["children_left"] = left
            md = report.write_report(result, path)
            if net.doc is not None:
                report.write_dashboard(net.doc, path)
            console.print(f"report: {path} and {md}")
        elif failed is not None:
            md = report.write_failed(failed, net.doc, state / "logs", path)
            console.print(f"failed: partial report {md}; logs kept in {state / 'logs'}")
        if not cfg.keep and failed is None:
            shutil.rmtree(state, ignore_errors=True)
    return code
