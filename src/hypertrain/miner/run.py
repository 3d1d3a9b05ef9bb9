"""``hypertrain-miner run``: train one round end to end and commit it.

Order of work (each step verifies what it receives before using it): signed manifest
and round records, start model (rebuilt from the last merge's broadcast, or downloaded
from the relay; either way checked against the round's hash: ``miner.start_model``),
the island's assignment from the round's public key, samples against the dataset
root; then ``H`` resumable steps, the update, uploads of the update and the checkpoint
index to the relay (the checkpoints themselves stay here until an audit selects them:
``miner.checkpoints``), and finally the signed commit. Re-running a finished or
half-finished round reuses the checkpoints on disk and the blobs already on the relay.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import CommitAnswer
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import (
    island_layout,
    open_dataset,
)
from hypertrain.evidence.start import (
    FetchSized,
    PreviousRound,
    carries_previous,
    derive_start_state,
)
from hypertrain.evidence.verify import find_commit, verify_commit
from hypertrain.miner.ahead_files import Prediction, adopt_ahead
from hypertrain.miner.checkpoints import CARRIED_FILE, checkpoint_addresses, write_carried
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import RunContext, round_records
from hypertrain.miner.errors import ConfigError, MinerError
from hypertrain.miner.hooks import RoundHooks
from hypertrain.miner.island import IslandResult, earlier_work, train_round
from hypertrain.miner.ranks import launch_ranks
from hypertrain.miner.report import Reporter
from hypertrain.miner.start_model import fetch_start_model, held_start_params
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import Commit, RoundOpen
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import NotFoundError as RelayNotFoundError
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample, TrainConfig
from hypertrain.trainer.state import TrainState

log = logging.getLogger(__name__)
UPDATE_FILE = "update.bin"  # the round's update as committed, kept beside its checkpoints


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    round: int
    root: str
    update_sha256: str
    commit: CommitAnswer | None  # None: the service already held this commit


def previous_round(
    ctx: RunContext, records: list[RoundOpen], hotkey: str, relay: RelayClient
) -> PreviousRound | None:
    """What the start state of round ``records[-1]`` needs of this island's previous round
    (``carry`` or overlapped rounds; None otherwise), from the verified records."""
    manifest, index = ctx.manifest, records[-1].round
    if not carries_previous(manifest, records[-1], hotkey):
        return None
    detail = ctx.service.round_detail(manifest.run_id, index - 1)
    raw = find_commit(detail, hotkey)
    commit = verify_commit(raw, manifest, hotkey, index - 1) if raw is not None else None

    def prev_start() -> dict[str, Tensor]:
        return held_start_params(ctx, relay, records[index - 1])

    return PreviousRound(commit, prev_start, len(records[index - 1].roster))


def start_state(
    ctx: RunContext,
    config: TrainConfig,
    records: list[RoundOpen],
    params: dict[str, Tensor],
    hotkey: str,
    relay: RelayClient,
) -> TrainState:
    """The round's start state as the run's state policy derives it (what auditors check).

    Under ``carry`` or overlapped rounds, the previous round's carried state and update
    are read from this island's work directory when their bytes are the committed ones,
    else from the relay.
    """
    index = records[-1].round
    previous = previous_round(ctx, records, hotkey, relay)
    try:
        return derive_start_state(
            ctx.manifest, config, index, params, previous, kept_or_relay(ctx, index - 1, relay)
        )
    except VerificationError as exc:
        raise MinerError(f"round {index}: cannot derive the start state: {exc}") from exc


def kept_or_relay(ctx: RunContext, index: int, relay: RelayClient) -> FetchSized:
    """A blob by hash from round ``index``'s work directory (the update this island built
    and the state it carried), else from the relay."""
    workdir = ctx.config.round_dir(index)

    def fetch(sha256: str, max_bytes: int) -> bytes:
        # the update first: it is small, and an overlapped start asks for it every round
        kept = [workdir / UPDATE_FILE, workdir / CARRIED_FILE] if index >= 0 else []
        for path in kept:
            data = path.read_bytes() if path.exists() else b""
            if data and hashlib.sha256(data).hexdigest() == sha256:
                return data
        return relay.get(sha256, max_bytes=max_bytes)

    return fetch


def round_inputs(
    ctx: RunContext,
    config: TrainConfig,
    records: list[RoundOpen],
    hotkey: str,
    relay: RelayClient,
    reporter: Reporter,
    started: Callable[[], None],
) -> tuple[dict[str, Tensor], TrainState]:
    """The round's start model and start state (``started`` between the two). A public
    input the relay no longer holds (lost, or gone while this island was away) is a
    :class:`MinerError`: this round is skipped, the next one is trained."""
    try:
        params = fetch_start_model(ctx, relay, records, reporter)
        started()
        return params, start_state(ctx, config, records, params, hotkey, relay)
    except RelayNotFoundError as exc:
        index = records[-1].round
        raise MinerError(f"round {index}: the relay does not hold its input: {exc}") from exc


def check_hooks(cfg: MinerConfig, config: TrainConfig, hooks: RoundHooks) -> None:
    """Refuse ranks for hooks that only run in this process (see ``RoundHooks``)."""
    if hooks.in_process_only and (cfg.ranks or config.layout.dp_ranks) != 1:
        raise ConfigError("a round with its own step hooks trains in one process (ranks = 1)")


def _upload(
    relay: RelayClient, result: IslandResult, update: bytes, index: int, expiry: int,
    carried: Path | None,
) -> tuple[str, str]:  # fmt: skip
    blobs = checkpoint_addresses(result.checkpoint_paths)  # uploaded only when audited
    carried_sha = checkpoint_addresses([carried])[0] if carried is not None else None
    idx = CheckpointIndex(index, tuple(x.hex() for x in result.leaves), blobs, carried_sha)
    index_sha = relay.put(idx.to_bytes(), kind="other", round=index, expiry_round=expiry)
    update_sha = relay.put(update, kind="update", round=index, expiry_round=expiry)
    return index_sha, update_sha


def _wait_for_round(ctx: RunContext, index: int, reporter: Reporter, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            round_records(ctx, index)
            return
        except MinerError:
            if time.monotonic() > deadline:
                raise
            reporter.event("waiting", round=index)
            time.sleep(ctx.config.poll_s)


def _say_resume(index: int, step: int | None, total: int, reporter: Reporter) -> None:
    """Say that a round an earlier run of this miner started is redone, and from where."""
    if step is None:
        return
    reporter.event("resuming", round=index, from_step=step, steps=total)
    log.info(
        "resuming round %d from step %d of %d (an earlier run stopped there): it is redone"
        " from that checkpoint, and training is deterministic, so it gives the same bytes",
        index,
        step,
        total,
    )


def run_round(
    ctx: RunContext, key: Hotkey, index: int, reporter: Reporter, *, wait_s: float = 0.0
) -> RoundOutcome:
    """Train, upload and commit round ``index`` (see the module docstring)."""
    cfg = ctx.config
    cfg.require("relay_url", "dataset_dir")
    if wait_s > 0:
        _wait_for_round(ctx, index, reporter, wait_s)
    reporter.event("round_seen", round=index)  # the wait for this round ends here
    records, detail = round_records(ctx, index)
    record: RoundOpen = records[-1]
    if key.ss58_address not in record.roster:
        raise MinerError(f"{key.ss58_address} is not in the roster of round {index} (join first)")
    if detail.phase != "train":
        raise MinerError(f"round {index} is in phase {detail.phase}, commits are closed")
    manifest, hooks = ctx.manifest, ctx.hooks(index)
    if hooks.event is not None:
        reporter.event(hooks.event, round=index, **hooks.details)
    layout = island_layout(manifest, record, key.ss58_address)  # as admitted, signed at open
    config = island_train_config(manifest, index, layout=layout, device=cfg.device)
    check_hooks(cfg, config, hooks)
    dataset = open_dataset(Path(cfg.dataset_dir), manifest)
    ids = ctx.opens.sample_ids(dataset, index, key.ss58_address)
    samples = hooks.samples(dataset, ids)
    with RelayClient(cfg.relay_url, key, manifest.run_id) as relay:

        def started() -> None:
            reporter.event("round_start", round=index, samples=len(samples),
                           steps=config.inner_steps)  # fmt: skip

        # the start model is kept for the next round's rebuild (and overlapped start)
        _, start = round_inputs(ctx, config, records, key.ss58_address, relay, reporter,
                                started)  # fmt: skip
        workdir = cfg.round_dir(index)
        if adopt_ahead(cfg, index, Prediction.of(ids, layout, start), reporter):
            reporter.event("adopted", round=index)  # trained ahead: the steps are on disk
        _say_resume(index, earlier_work(workdir, start, config), config.inner_steps, reporter)
        result = train_steps(ctx, config, start, samples, workdir, index, reporter)
        # the update is the delta from the island's own start (its overlapped start too)
        update = hooks.update(start.params(), result.final, manifest.compression)
        keep_update(workdir, update.data)
        carried = None
        if manifest.inner.state_policy == "carry":
            carried = write_carried(workdir, result.final, start.params(), manifest)
        expiry = ctx.service.beacon_round() + cfg.expiry_margin
        index_sha, update_sha = _upload(relay, result, update.data, index, expiry, carried)
        reporter.event("uploaded", round=index, bytes=len(update.data), update_sha256=update_sha)
        body = Commit(
            round=index,
            checkpoint_root=result.root.hex(),
            leaf_count=len(result.leaves),
            update_sha256=hashlib.sha256(update.data).hexdigest(),
            update_bytes=len(update.data),
            tokens=result.tokens,
            update_url=relay.url(update_sha),
            checkpoint_url=relay.url(index_sha),
            train_loss=sum(result.losses) / len(result.losses) if result.losses else None,
        )
    answer = _post_commit(ctx, key, body, expiry)
    reporter.event("committed", round=index, root=body.checkpoint_root, loss=body.train_loss)
    return RoundOutcome(index, body.checkpoint_root, body.update_sha256, answer)


def train_steps(
    ctx: RunContext, config: TrainConfig, start: TrainState, samples: list[Sample],
    workdir: Path, index: int, reporter: Reporter,
) -> IslandResult:  # fmt: skip
    """The round's ``H`` steps from ``start`` (resumed from ``workdir``), by this process
    or the island's ranks, with the ``trained`` event at the end."""
    hooks = ctx.hooks(index)
    reporter.start_steps(config.inner_steps, f"round {index}")
    try:
        launch_ranks(ctx.config, ctx.manifest, config, start, samples, workdir)
        result = train_round(
            start,
            config,
            samples,
            workdir,
            on_step=lambda ev: reporter.step(index, ev),
            step=hooks.step,
        )
    finally:
        reporter.stop_steps()
    reporter.event("trained", round=index)
    return result


def keep_update(workdir: Path, data: bytes) -> None:
    """The round's update beside its checkpoints (the next overlapped start reads it)."""
    tmp = workdir / (UPDATE_FILE + ".part")
    tmp.write_bytes(data)
    tmp.replace(workdir / UPDATE_FILE)


def _post_commit(ctx: RunContext, key: Hotkey, body: Commit, expiry: int) -> CommitAnswer | None:
    env = seal(
        key,
        domain="commit",
        run_id=ctx.manifest.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=expiry,
    )
    try:
        return ctx.service.commit(env)
    except ServiceError as exc:
        if exc.code == "duplicate":
            return None
        if exc.code == "late":
            # The round moved on while we trained: nothing to commit, nothing at stake.
            raise MinerError(f"round {body.round}: commit deadline passed ({exc})") from exc
        raise
