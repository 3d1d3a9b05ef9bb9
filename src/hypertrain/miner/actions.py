"""The handlers behind ``hypertrain-miner``'s subcommands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hypertrain.auditor.index import sha_from_url
from hypertrain.challenge.client import ChallengeClient
from hypertrain.challenge.errors import ServiceError
from hypertrain.challenge.models import RoundDetail
from hypertrain.miner.admission import SelfcheckConfig, selfcheck
from hypertrain.miner.config import MinerConfig, config_from_args
from hypertrain.miner.context import RunContext, load_run
from hypertrain.miner.errors import ConfigError, MinerError
from hypertrain.miner.island import checkpoint_path
from hypertrain.miner.report import Reporter
from hypertrain.miner.run import run_round
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import Commit, Dispute, JoinRequest, Verdict
from hypertrain.relay.client import RelayClient


def _config(args: argparse.Namespace) -> MinerConfig:
    return config_from_args(args)


def selfcheck_cmd(args: argparse.Namespace) -> int:
    reports = selfcheck(cfg=SelfcheckConfig(probe_bytes=args.probe_mib << 20))
    if args.json:
        doc = {"devices": [r.model_dump(mode="json") for r in reports]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title="hypertrain selfcheck")
        for col in ("#", "device", "class", "memory GiB", "workload hash", "memory probe"):
            table.add_column(col)
        for r in reports:
            table.add_row(
                str(r.index),
                r.name,
                r.device_class,
                f"{r.memory_bytes / 2**30:.1f}",
                r.workload_hash[:16] + "…",
                "ok" if r.memory_probe_ok else "FAILED",
            )
        Console(file=sys.stdout).print(table)
    consistent = len({r.workload_hash for r in reports}) == 1
    return 0 if consistent and all(r.memory_probe_ok for r in reports) else 1


def join_layout(manifest: RunManifest, cfg: MinerConfig, devices: int) -> LayoutSpec:
    """One rank per device, ``cfg.micro_batches`` per rank (or the run's), the run's
    micro-batch size; refused here already when outside the run's limits."""
    default = manifest.round.layout
    layout = LayoutSpec(
        dp_ranks=devices,
        micro_batches=cfg.micro_batches or default.micro_batches,
        micro_batch_size=default.micro_batch_size,
    )
    problem = manifest.round.layout_problem(layout)
    if problem is not None:
        raise ConfigError(f"layout outside the run's limits: {problem}")
    return layout


def join_cmd(args: argparse.Namespace) -> int:
    cfg = _config(args)
    key = cfg.load_key()
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service, check=False)
        devices = selfcheck()
        body = JoinRequest(
            devices=devices,
            layout=join_layout(ctx.manifest, cfg, len(devices)),
            endpoint=cfg.endpoint or None,
        )
        env = seal(
            key,
            domain="join",
            run_id=cfg.run_id,
            body=body.model_dump(mode="json"),
            expiry_round=service.beacon_round() + cfg.expiry_margin,
        )
        answer = service.join(env)
    sys.stdout.write(json.dumps(answer.model_dump(mode="json"), sort_keys=True) + "\n")
    return 0


def run_cmd(args: argparse.Namespace) -> int:
    if (args.round is None) == (not args.follow):
        raise MinerError("give exactly one of --round W or --follow")
    cfg = _config(args)
    key = cfg.load_key()
    reporter = Reporter("miner")
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service)
        reporter.event(
            "started", run_id=cfg.run_id, hotkey=key.ss58_address, honeypot=cfg.honeypot or None
        )
        if not args.follow:
            run_round(ctx, key, args.round, reporter, wait_s=args.wait_s)
            return 0
        done: set[int] = set()
        while True:
            try:
                _follow_once(ctx, key, service, done, reporter)
            except ServiceError as exc:
                if exc.status != 0:
                    raise
                reporter.event("service_unreachable", reason=str(exc))
            time.sleep(cfg.poll_s)


def _follow_once(
    ctx: RunContext, key: Hotkey, service: ChallengeClient, done: set[int], reporter: Reporter
) -> None:
    """Train every round that is open for training and not yet handled."""
    for summary in service.rounds(ctx.manifest.run_id):
        index = summary.round
        if summary.phase == "train" and index not in done:
            try:
                run_round(ctx, key, index, reporter)
            except MinerError as exc:
                reporter.event("skipped", round=index, reason=str(exc))
            done.add(index)


def _mine(detail: RoundDetail, hotkey: str) -> tuple[Commit | None, list[tuple[str, Verdict]]]:
    """This island's commit of a round and the verdicts on it (by verdict id)."""
    commit = next((c for c in detail.commits if c.signer == hotkey), None)
    verdicts = [(v.verdict_id, Verdict.model_validate(v.envelope.body)) for v in detail.verdicts]
    mine = [(vid, v) for vid, v in verdicts if v.hotkey == hotkey]
    return (Commit.model_validate(commit.body) if commit else None), mine


def watch_cmd(args: argparse.Namespace) -> int:
    """Keep this island's committed checkpoints available and report (or dispute) verdicts."""
    cfg = _config(args)
    key = cfg.load_key()
    reporter = Reporter("miner")
    seen: set[str] = set()
    with (
        ChallengeClient(cfg.service_url) as service,
        RelayClient(cfg.relay_url, key, cfg.run_id) as relay,
    ):
        ctx = load_run(cfg, service, check=False)
        while True:
            for summary in service.rounds(cfg.run_id):
                detail = service.round_detail(cfg.run_id, summary.round)
                commit, verdicts = _mine(detail, key.ss58_address)
                if commit is not None and summary.phase in ("train", "beacon", "audit"):
                    _serve(relay, cfg.round_dir(summary.round), commit, service, cfg)
                for verdict_id, body in verdicts:
                    if verdict_id not in seen:
                        seen.add(verdict_id)
                        reporter.event(
                            "verdict",
                            round=body.round,
                            result=body.result,
                            first_bad_leaf=body.first_bad_leaf,
                        )
                        if args.dispute and body.result == "mismatch":
                            _dispute(ctx, key, service, body.round, verdict_id, cfg)
            if not args.follow:
                return 0
            time.sleep(cfg.poll_s)


def _serve(
    relay: RelayClient, workdir: Path, body: Commit, service: ChallengeClient, cfg: MinerConfig
) -> None:
    """Re-upload any checkpoint the relay lost (audits fetch them from there)."""
    if relay.exists(sha_from_url(body.checkpoint_url)) is None:
        return  # the index itself is gone; nothing verifiable to restore from here
    for k in range(body.leaf_count):
        path = checkpoint_path(workdir, k)
        if path.exists():
            relay.put(
                path,
                kind="checkpoint",
                round=body.round,
                expiry_round=service.beacon_round() + cfg.expiry_margin,
            )


def _dispute(
    ctx: Any, key: Any, service: ChallengeClient, index: int, verdict_id: str, cfg: Any
) -> None:
    body = Dispute(
        round=index,
        verdict_id=verdict_id,
        reason="island's checkpoints reproduce its committed leaves",
    )
    env = seal(
        key,
        domain="dispute",
        run_id=cfg.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=service.beacon_round() + cfg.expiry_margin,
    )
    try:
        service.dispute(env)
    except ServiceError as exc:
        if exc.code not in ("duplicate", "late"):
            raise


def status_cmd(args: argparse.Namespace) -> int:
    cfg = _config(args)
    key = cfg.load_key()
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service, check=False)
        roster = [r for r in service.roster(cfg.run_id) if r.hotkey == key.ss58_address]
        table = Table(title=f"{key.ss58_address} in {cfg.run_id}")
        for col in ("round", "phase", "committed", "verdicts"):
            table.add_column(col)
        for summary in service.rounds(cfg.run_id):
            detail = service.round_detail(cfg.run_id, summary.round)
            commit, verdicts = _mine(detail, key.ss58_address)
            results = ",".join(v.result for _, v in verdicts) or "-"
            table.add_row(str(summary.round), summary.phase, "yes" if commit else "no", results)
        console = Console(file=sys.stdout)
        console.print(
            f"manifest {ctx.manifest.digest()[:16]}…  admitted: {'yes' if roster else 'no'}"
        )
        console.print(table)
    return 0
