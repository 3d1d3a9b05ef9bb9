"""Overlapped rounds: train round ``r + 1`` while round ``r`` is audited and merged.

With ``round.overlap`` an island that committed round ``r`` knows, once the beacon round
that selects round ``r``'s audits is out, everything round ``r + 1`` will ask of it if
the roster stays as it is: its samples (the key comes from that beacon round:
:mod:`hypertrain.protocol.round_key`), its layout and its start state (round ``r``'s
start model minus its share of its own round-``r`` update: :mod:`hypertrain.evidence.
start`). :func:`train_ahead` serves round ``r``'s audits first (the auditors need this
island's checkpoints before anything else), then trains round ``r + 1`` from that
prediction into ``ahead/`` (:mod:`hypertrain.miner.ahead_files`). When round ``r + 1``
opens, :func:`hypertrain.miner.run.run_round` adopts the work if the round asks for
exactly it, and uploads and commits at once; if not (a roster changed) the round is
trained as usual. The prediction only decides *when* the island computes, never what
it commits: every byte is checked against the opened round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import island_layout, open_dataset
from hypertrain.evidence.start import derive_start_state
from hypertrain.miner.ahead_files import Prediction, begin_ahead
from hypertrain.miner.context import RunContext, round_records
from hypertrain.miner.errors import MinerError
from hypertrain.miner.report import Reporter
from hypertrain.miner.run import check_hooks, kept_or_relay, previous_round, train_steps
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import RoundOpen
from hypertrain.protocol.round_key import assignment_key
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.round_config import island_train_config


def predicted_open(record: RoundOpen, run_id: str, selection_randomness: str) -> RoundOpen:
    """Round ``record.round + 1`` as this island expects it to open: the same roster and
    layouts, the key of round ``record``'s selecting beacon round (other fields are not
    used for training and are copied)."""
    nxt = record.round + 1
    key = assignment_key(run_id, nxt, selection_randomness)
    return record.model_copy(update={"round": nxt, "assignment_key": key})


def _selected(ctx: RunContext, index: int, stop: Callable[[], bool]) -> RoundDetail | None:
    """Round ``index``'s detail once its audits are selected; None when they never will
    be for this island's purpose (the next round opened first, the round ended without
    a selection, or a stop was asked)."""
    run_id = ctx.manifest.run_id
    while not stop():
        detail = ctx.service.round_detail(run_id, index)
        if detail.selection_beacon is not None:
            return detail
        if detail.phase not in ("train", "beacon") or _opened(ctx, index + 1):
            return None
        time.sleep(ctx.config.poll_s)
    return None


def _opened(ctx: RunContext, index: int) -> bool:
    try:
        ctx.service.round_detail(ctx.manifest.run_id, index)
    except ServiceError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def train_ahead(
    ctx: RunContext,
    key: Hotkey,
    index: int,
    reporter: Reporter,
    serve: Callable[[], None],
    stop: Callable[[], bool] = lambda: False,
) -> bool:
    """Train round ``index + 1`` ahead after committing round ``index`` (see the module
    docstring); True when its steps are on disk. Nothing here is committed."""
    if not ctx.manifest.round.overlap:
        return False
    detail = _selected(ctx, index, stop)
    if detail is None or detail.selection_beacon is None:
        return False
    serve()  # this round's selected checkpoints go up before the next round's training
    if _opened(ctx, index + 1):
        return False  # the round is open: it is trained the usual way
    hotkey, cfg, manifest = key.ss58_address, ctx.config, ctx.manifest
    records, _ = round_records(ctx, index)
    nxt = predicted_open(records[-1], manifest.run_id, detail.selection_beacon.randomness)
    if hotkey not in nxt.roster:
        return False
    reporter.event("round_seen", round=nxt.round, ahead=True)
    layout = island_layout(manifest, nxt, hotkey)
    config = island_train_config(manifest, nxt.round, layout=layout, device=cfg.device)
    dataset = open_dataset(Path(cfg.dataset_dir), manifest)
    hooks = ctx.hooks(nxt.round)
    check_hooks(cfg, config, hooks)  # as the round itself would
    try:
        ids = ctx.opens.next_ids(dataset, nxt, hotkey)
        with RelayClient(cfg.relay_url, key, manifest.run_id) as relay:
            previous = previous_round(ctx, [*records, nxt], hotkey, relay)
            if previous is None or previous.commit is None:
                return False  # its start would be the merged model: nothing to start from
            fetch = kept_or_relay(ctx, index, relay)
            start = derive_start_state(manifest, config, nxt.round, {}, previous, fetch)
    except VerificationError as exc:
        raise MinerError(f"round {nxt.round} ahead: {exc}") from exc
    samples = hooks.samples(dataset, ids)
    workdir = begin_ahead(cfg, nxt.round, Prediction.of(ids, layout, start))
    reporter.event("round_start", round=nxt.round, samples=len(samples),
                   steps=config.inner_steps, ahead=True)  # fmt: skip
    train_steps(ctx, config, start, samples, workdir, nxt.round, reporter)
    return True
