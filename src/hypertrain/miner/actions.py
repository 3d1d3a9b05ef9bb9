"""The handlers behind ``hypertrain-miner``'s subcommands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.dispute.narrowing import describe
from hypertrain.evidence.index import sha_from_url
from hypertrain.miner.admission import selfcheck
from hypertrain.miner.ahead import train_ahead
from hypertrain.miner.checkpoints import (
    checkpoints_to_upload,
    owed_carried,
    selected_segments,
    upload_selected,
)
from hypertrain.miner.config import MinerConfig, config_from_args
from hypertrain.miner.context import RunContext, load_run
from hypertrain.miner.defence import defend
from hypertrain.miner.disputes import answer_own, prune_closed
from hypertrain.miner.errors import MinerError
from hypertrain.miner.hooks import HooksFor, honest
from hypertrain.miner.island import checkpoint_path
from hypertrain.miner.joining import join_cmd as join_cmd  # the handler of `join`
from hypertrain.miner.ranks import RankError
from hypertrain.miner.report import Reporter
from hypertrain.miner.retention import Retention
from hypertrain.miner.run import run_round
from hypertrain.miner.standing import money_line, weight_line
from hypertrain.miner.stopping import StopSignal, catch_stop_signals, stopped
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import Commit, Leave, Verdict
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import RelayError
from hypertrain.rolekit import (
    PEER_BACKOFF,
    PEER_MAX_DELAY_S,
    OnError,
    peer_away,
    peer_delay_s,
    poll,
)


def _config(args: argparse.Namespace) -> MinerConfig:
    return config_from_args(args)


def selfcheck_cmd(args: argparse.Namespace) -> int:
    reports = selfcheck(claim_bytes=args.claim_mib << 20)
    if args.json:
        doc = {"devices": [r.model_dump(mode="json") for r in reports]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title="hypertrain selfcheck")
        for col in ("#", "device", "class", "memory claim MiB", "workload hash"):
            table.add_column(col)
        for r in reports:
            table.add_row(
                str(r.index),
                r.name,
                r.device_class,
                f"{r.memory_bytes / 2**20:.0f}",
                r.workload_hash[:16] + "…",
            )
        Console(file=sys.stdout).print(table)
    return 0 if len({r.workload_hash for r in reports}) == 1 else 1


def leave_cmd(args: argparse.Namespace) -> int:
    """Send a signed ``leave``: the island trains no round opened after it."""
    cfg = _config(args)
    key = cfg.load_key()
    with ChallengeClient(cfg.service_url) as service:
        env = seal(
            key,
            domain="leave",
            run_id=cfg.run_id,
            body=Leave(reason=args.reason).model_dump(mode="json"),
            expiry_round=service.beacon_round() + cfg.expiry_margin,
        )
        answer = service.leave(env)
    sys.stdout.write(json.dumps(answer.model_dump(mode="json"), sort_keys=True) + "\n")
    sys.stdout.write(
        f"left {answer.run_id} from round {answer.left_round}: rounds before it are still"
        " audited and settled; the escrow keeps vesting unless a fault is proven\n"
    )
    return 0


def run_cmd(args: argparse.Namespace, *, hooks: HooksFor = honest) -> int:
    if (args.round is None) == (not args.follow):
        raise MinerError("give exactly one of --round W or --follow")
    cfg = _config(args)
    key = cfg.load_key()
    reporter = Reporter("miner")
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service, hooks=hooks, on_wait=_waiting(reporter, args.follow))
        catch_stop_signals()  # after load_run: it may re-execute this process
        try:
            reporter.event("started", run_id=cfg.run_id, hotkey=key.ss58_address)
            if not args.follow:
                run_round(ctx, key, args.round, reporter, wait_s=args.wait_s)
                return 0
            follow_rounds(ctx, key, service, reporter)
            return 0
        except StopSignal as stop:
            return stopped(stop, reporter)


def _waiting(reporter: Reporter, follow: bool) -> OnError | None:
    """How a long-lived command reports a service it waits for at start (one-shot: none,
    so it fails at once)."""
    if not follow:
        return None
    return lambda exc, delay: _peer_failed(reporter, exc, delay)


def follow_rounds(
    ctx: RunContext,
    key: Hotkey,
    service: ChallengeClient,
    reporter: Reporter,
    *,
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Train every round as it opens and serve audits, until a signal stops the miner
    (or ``stop()``).

    A service or relay that cannot be reached or fails (5xx) is ``service_unreachable`` /
    ``relay_unreachable`` and waited out with backoff (1 s doubling to 30 s); a refusal
    (4xx) ends the command."""
    done: set[int] = set()
    served: set[int] = set()
    kept = Retention()  # a long run must not fill the disk (miner.retention)

    def serve() -> None:
        serve_audits(ctx, key, service, served, reporter)

    def ahead(index: int) -> None:  # overlapped rounds: the next round while this one waits
        try:
            train_ahead(ctx, key, index, reporter, serve, stop)
        except (MinerError, RankError) as exc:
            reporter.event("ahead_skipped", round=index + 1, reason=str(exc))

    def one_pass() -> None:
        _follow_once(ctx, key, service, done, reporter, ahead)
        serve()
        kept.prune(ctx, key, service.rounds(ctx.manifest.run_id), reporter)

    def away(exc: Exception, delay: float) -> None:
        if not peer_away(exc):
            raise exc
        _peer_failed(reporter, exc, delay)

    poll(one_pass, poll_s=ctx.config.poll_s, stop=stop, passing=(ServiceError, RelayError),
         on_error=away, backoff=PEER_BACKOFF, max_delay_s=PEER_MAX_DELAY_S,
         sleep=sleep)  # fmt: skip


def _follow_once(
    ctx: RunContext, key: Hotkey, service: ChallengeClient, done: set[int], reporter: Reporter,
    ahead: Callable[[int], None] = lambda index: None,
) -> None:  # fmt: skip
    """Train every round that is open for training and not yet handled; after a commit,
    ``ahead`` (overlapped rounds: :mod:`hypertrain.miner.ahead`)."""
    for summary in service.rounds(ctx.manifest.run_id):
        index = summary.round
        if summary.phase == "train" and index not in done:
            try:
                run_round(ctx, key, index, reporter)
            except RankError as exc:
                # Retried at the next poll while the round trains: resumes from the last
                # checkpoint the ranks wrote.
                reporter.event("rank_failed", round=index, reason=str(exc))
                continue
            except MinerError as exc:
                reporter.event("skipped", round=index, reason=str(exc))
                done.add(index)
                continue
            done.add(index)
            ahead(index)


def _mine(detail: RoundDetail, hotkey: str) -> tuple[Commit | None, list[tuple[str, Verdict]]]:
    """This island's commit of a round and the verdicts on it (by verdict id)."""
    commit = next((c for c in detail.commits if c.signer == hotkey), None)
    verdicts = [(v.verdict_id, Verdict.model_validate(v.envelope.body)) for v in detail.verdicts]
    mine = [(vid, v) for vid, v in verdicts if v.hotkey == hotkey]
    return (Commit.model_validate(commit.body) if commit else None), mine


def watch_cmd(args: argparse.Namespace, *, hooks: HooksFor = honest) -> int:
    """Keep this island's committed checkpoints available and report (or dispute) verdicts."""
    cfg = _config(args)
    key = cfg.load_key()
    reporter = Reporter("miner")
    seen: dict[str, int] = {}  # verdict id -> the beacon round this island first saw it at
    parties: dict[str, Any] = {}  # dispute id -> this island's replay of the segment
    with (
        ChallengeClient(cfg.service_url) as service,
        RelayClient(cfg.relay_url, key, cfg.run_id) as relay,
    ):
        ctx = load_run(cfg, service, check=False, hooks=hooks,
                       on_wait=_waiting(reporter, args.follow))  # fmt: skip
        reporter.event("started", run_id=cfg.run_id, hotkey=key.ss58_address, watch=True)

        def one_pass() -> None:
            _watch_pass(ctx, key, service, relay, seen, parties, reporter, args)

        watch_passes(one_pass, reporter, follow=args.follow, poll_s=cfg.poll_s)
        return 0


def watch_passes(
    one_pass: Callable[[], None],
    reporter: Reporter,
    *,
    follow: bool,
    poll_s: float,
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """One watch pass, or with ``follow`` one per ``poll_s`` until ``stop()`` (or the
    process's own stop signal). A long-lived watch outlives its peers: a service or relay
    that cannot be reached or fails (5xx) is waited for with backoff (``service_unreachable``,
    ``relay_unreachable``: 1 s doubling to 30 s), and a refusal (a game decided meanwhile,
    a late answer) is ``service_refused`` or ``relay_refused``, and the next pass goes on
    ``poll_s`` later; a configuration error is raised before the first pass."""
    away = 0  # passes in a row that found a peer away
    while True:
        delay = poll_s
        try:
            one_pass()
            away = 0
        except (ServiceError, RelayError) as exc:
            if not follow:
                raise
            away = away + 1 if peer_away(exc) else 0
            delay = max(poll_s, peer_delay_s(away)) if away else poll_s
            _peer_failed(reporter, exc, delay)
        if not follow or stop():
            return
        sleep(delay)


def _peer_failed(reporter: Reporter, exc: Exception, retry_in_s: float) -> None:
    """A failed call to the service or a relay, as one event: ``*_unreachable`` for a peer
    away (no answer, 5xx), ``*_refused`` for a refusal."""
    source = "service" if isinstance(exc, ServiceError) else "relay"
    if peer_away(exc):
        reporter.event(f"{source}_unreachable", reason=str(exc)[:500], retry_in_s=retry_in_s)
        return
    status = getattr(exc, "status", 0)
    code = exc.code if isinstance(exc, ServiceError) else getattr(exc, "reason", "")
    reporter.event(f"{source}_refused", status=status, code=code, reason=str(exc)[:500])


def _watch_pass(
    ctx: RunContext,
    key: Hotkey,
    service: ChallengeClient,
    relay: RelayClient,
    seen: dict[str, int],
    parties: dict[str, Any],
    reporter: Reporter,
    args: argparse.Namespace,
) -> None:
    """One look at every round: serve our checkpoints, report and contest new verdicts.

    Each verdict is stamped with a beacon round read after it was seen (never before its
    arrival), which bounds its own dispute window for pruning.
    """
    cfg = ctx.config
    for summary in service.rounds(cfg.run_id):
        detail = service.round_detail(cfg.run_id, summary.round)
        commit, verdicts = _mine(detail, key.ss58_address)
        if commit is not None and summary.phase in ("train", "beacon", "audit", "merge", "settle"):
            _serve(relay, cfg.round_dir(summary.round), commit, service, ctx)
        fresh = [(vid, body) for vid, body in verdicts if vid not in seen]
        stamp = service.beacon_round() if fresh else 0
        for verdict_id, body in fresh:
            seen[verdict_id] = stamp
            reporter.event(
                "verdict", round=body.round, result=body.result, first_bad_leaf=body.first_bad_leaf
            )
            if (args.dispute or args.follow) and body.result != "match":
                defend(ctx, key, relay, verdict_id, body, reporter)
    answer_own(ctx, key, parties, reporter)
    if args.follow:
        prune_closed(ctx, key, service.rounds(cfg.run_id), reporter, seen)


def serve_audits(
    ctx: RunContext, key: Hotkey, service: ChallengeClient, served: set[int], reporter: Reporter
) -> None:
    """Upload, once per round, the checkpoints the round's audit selected from this island."""
    for summary in service.rounds(ctx.manifest.run_id):
        index = summary.round
        if summary.phase != "audit" or index in served:
            continue
        detail = service.round_detail(ctx.manifest.run_id, index)
        segments = selected_segments(detail.assignments, ctx.manifest, key.ss58_address)
        if segments:
            expiry = service.beacon_round() + ctx.config.expiry_margin
            try:
                with RelayClient(ctx.config.relay_url, key, ctx.manifest.run_id) as relay:
                    carried = owed_carried(ctx, key.ss58_address, detail)
                    sent = upload_selected(
                        relay, ctx.config.round_dir(index), index, segments, expiry, carried
                    )
            except OSError as exc:
                reporter.event("checkpoint_missing", round=index, reason=str(exc))
            else:
                reporter.event("checkpoints_uploaded", round=index, segments=segments, bytes=sent)
        served.add(index)


def _serve(
    relay: RelayClient, workdir: Path, body: Commit, service: ChallengeClient, ctx: RunContext
) -> None:
    """Upload (again, if the relay lost them) the checkpoints an audit selected from us."""
    if relay.exists(sha_from_url(body.checkpoint_url)) is None:
        return  # the index itself is gone; nothing verifiable to restore from here
    cfg, manifest = ctx.config, ctx.manifest
    detail = service.round_detail(manifest.run_id, body.round)
    assert relay.key is not None  # the watch loop's relay client uploads with our key
    segments = selected_segments(detail.assignments, manifest, relay.key.ss58_address)
    paths = [checkpoint_path(workdir, k) for k in checkpoints_to_upload(segments or [])]
    if segments is not None:
        carried = owed_carried(ctx, relay.key.ss58_address, detail)
        paths += [carried] if carried is not None else []
    for path in paths:
        if path.exists():
            relay.put(
                path,
                kind="checkpoint",
                round=body.round,
                expiry_round=service.beacon_round() + cfg.expiry_margin,
            )


def status_cmd(args: argparse.Namespace) -> int:
    cfg = _config(args)
    key = cfg.load_key()
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service, check=False)
        roster = [r for r in service.roster(cfg.run_id) if r.hotkey == key.ss58_address]
        table = Table(title=f"{key.ss58_address} in {cfg.run_id}")
        console_lines: list[str] = []  # each dispute's narrowing, step by step
        for col in ("round", "phase", "committed", "verdicts", "disputes"):
            table.add_column(col)
        mine = [d for d in service.disputes(cfg.run_id) if d.hotkey == key.ss58_address]
        for summary in service.rounds(cfg.run_id):
            detail = service.round_detail(cfg.run_id, summary.round)
            commit, verdicts = _mine(detail, key.ss58_address)
            results = ",".join(v.result for _, v in verdicts) or "-"
            games = [d.game for d in mine if d.round == summary.round]
            table.add_row(
                str(summary.round),
                summary.phase,
                "yes" if commit else "no",
                results,
                ",".join(g.outcome or g.stage for g in games) or "-",
            )
            for game in games:
                for typed in game.steps:
                    line = f"beacon {typed.beacon_round}: {describe(typed)}"
                    console_lines.append(f"round {summary.round} dispute: {line}")
        console = Console(file=sys.stdout)
        console.print(
            f"manifest {ctx.manifest.digest()[:16]}…  admitted: {'yes' if roster else 'no'}"
        )
        console.print(money_line(roster[0] if roster else None), markup=False)
        console.print(weight_line(service.latest_weights(), key.ss58_address), markup=False)
        console.print(table)
        for line in console_lines:
            console.print(line, markup=False)
    return 0
