"""Run a whole devnet: start every process, follow the rounds, report, stop cleanly.

Under ``--state-dir`` (default ``.devnet``): ``state/`` the service, relay, beacon, island
and worker directories and every log (removed at a clean exit unless ``--keep``; kept
when the run fails, beside a partial ``report.json`` marked failed with the reason);
``model/`` the exported model; ``report.json`` and ``report.md`` the run report (an earlier
run's removed at start). Ctrl-C stops every child and still writes what is known."""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import subprocess
import time
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.devnet import (
    chaos,
    evaluate,
    honeypots,
    interrupt,
    lock,
    prep,
    procs,
    report,
    resume,
    roles,
    rollbacks,
    utilisation,
    view,
)
from hypertrain.devnet.config import (
    HONEYPOT_STRATEGIES,
    PER_ISLAND_LAYOUTS_SUPPORTED,
    ROLLBACK_STRATEGIES,
    DevnetConfig,
)
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.launch import Devnet, auth_headers, start
from hypertrain.devnet.procs import Supervisor, hypertrain_cmd

__all__ = ["Devnet", "run_devnet", "start"]

log = logging.getLogger(__name__)
SERVING = ("beacon", "service", "relay")


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
            interrupt.pause(1.0)


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
                  headers=auth_headers(token), timeout=30)  # fmt: skip
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
    """Compute over wall time per round and over the whole run, with the waits by cause,
    from every child's event lines and the service's round records."""
    assert net.secrets is not None and net.doc is not None
    logs = {c.name: c.tail(1 << 26).splitlines() for c in net.sup.children}
    hotkeys = {m.name: m.ss58 for m in net.secrets.islands}
    honest = set(hotkeys) - {net.secrets.islands[-1].name}  # the last island: the honeypot
    return utilisation.run_utilisation(
        net.doc, net.finished_at, logs, hotkeys=hotkeys, honest=honest
    )


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
    session = resume.load(state) if cfg.resume else None
    if session is None:
        shutil.rmtree(state, ignore_errors=True)
    else:
        stale = procs.stop_stale(state / "logs")
        console.print(f"resuming the run in {state} (stopped {stale} processes it left)")
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
        start(net, dataset, session)
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
                interrupt.pause(1.0)
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
