"""The round's start model: rebuilt from the last merge's broadcast, or downloaded in full.

An island that trained round ``r - 1`` keeps that round's start model (``start_model.
safetensors`` in the round's directory). When the merge of round ``r - 1`` published a
broadcast (``trainer.broadcast``) and its tape message names the model the island holds
and the model round ``r`` opened with, the island fetches the broadcast (about a quarter
of the model's bytes) and rebuilds round ``r``'s start model from it. The trust root is
round ``r``'s verified round-open record: the rebuilt blob must hash to its
``start_model_sha256``. A broadcast that does not rebuild it is refused (a
``broadcast_refused`` event with the reason) and the full model is downloaded instead,
as it is for a joining island or one catching up; both paths yield the same verified
bytes. Round 0's start model of a run without a warm start is the seed's initial
parameters (``evidence.genesis``), so the island computes it instead of downloading it,
and downloads it only if its bytes are not the record's.

A round rolled back after its merge (a fault proven late) has a corrected tape that
supersedes its merge-tape; the island reads the round's *current* tape, so a
correction's broadcast rebuilds the corrected model from the start model it moved,
and an island holding a model the correction left behind downloads the corrected one.
"""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from hypertrain.evidence.genesis import genesis_blob
from hypertrain.evidence.inputs import fetch_start_params
from hypertrain.miner.context import RunContext
from hypertrain.miner.report import Reporter
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import MergeTape, RoundOpen
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.blob import blob_hash, decode_model_blob
from hypertrain.trainer.broadcast import BroadcastError, rebuild_model

START_MODEL_FILE = "start_model.safetensors"
MAX_BROADCAST_BYTES = 1 << 34


def held_model_path(ctx: RunContext, index: int) -> Path:
    """Where the island keeps round ``index``'s start model."""
    return ctx.config.round_dir(index) / START_MODEL_FILE


def _keep(ctx: RunContext, index: int, blob: bytes) -> None:
    path = held_model_path(ctx, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(blob)
    tmp.replace(path)


def _broadcast_for(ctx: RunContext, records: list[RoundOpen]) -> MergeTape | None:
    """The previous merge's tape message when it broadcasts exactly held -> this start."""
    prev, record = records[-2], records[-1]
    tape = ctx.service.round_detail(ctx.manifest.run_id, prev.round).current_merge()
    if tape is None:
        return None
    fits = (
        tape.start_model_sha256 == prev.start_model_sha256
        and tape.new_model_sha256 == record.start_model_sha256
    )
    return tape if tape.broadcast_sha256 is not None and fits else None


def rebuilt_start(
    ctx: RunContext, relay: RelayClient, records: list[RoundOpen]
) -> tuple[bytes, dict[str, Tensor]] | None:
    """Round ``records[-1]``'s start model from the broadcast; None when this island does
    not hold the previous start model or the run published no broadcast for it.
    Raises :class:`BroadcastError` when the broadcast does not rebuild the model."""
    if len(records) < 2:
        return None
    path = held_model_path(ctx, records[-2].round)
    tape = _broadcast_for(ctx, records) if path.is_file() else None
    if tape is None or tape.broadcast_sha256 is None:
        return None
    held = path.read_bytes()
    if blob_hash(held) != records[-2].start_model_sha256:
        return None  # a stale or partial local copy: not the model the broadcast moves
    spec = ctx.manifest.model
    start = decode_model_blob(held, spec, records[-2].start_model_sha256)
    data = relay.get(tape.broadcast_sha256, max_bytes=MAX_BROADCAST_BYTES)
    compression, bits = ctx.manifest.compression, ctx.manifest.outer.broadcast_bits or 8
    expected = records[-1].start_model_sha256
    return rebuild_model(
        start, data, spec, compression.block_size, expected, bits, compression.entropy
    )


def derived_genesis(
    manifest: RunManifest, record: RoundOpen
) -> tuple[bytes, dict[str, Tensor]] | None:
    """Round 0's start model computed here: the seed's initial parameters, when the run
    has no warm start and their bytes are the record's (None otherwise: download it)."""
    if record.round != 0 or manifest.warm_start is not None:
        return None
    blob = genesis_blob(manifest)
    if blob_hash(blob) != record.start_model_sha256:
        return None
    return blob, decode_model_blob(blob, manifest.model, record.start_model_sha256)


def fetch_start_model(
    ctx: RunContext, relay: RelayClient, records: list[RoundOpen], reporter: Reporter
) -> dict[str, Tensor]:
    """The verified start model of round ``records[-1]``, kept for the next rebuild."""
    record = records[-1]
    reporter.event("start_model_fetch", round=record.round)  # the download starts
    try:
        got = rebuilt_start(ctx, relay, records)
    except BroadcastError as exc:
        reporter.event("broadcast_refused", round=record.round, reason=str(exc))
        got = None
    derived = derived_genesis(ctx.manifest, record) if got is None else None
    if got is not None:
        reporter.event("start_model", round=record.round, source="broadcast")
    elif derived is not None:
        got = derived
        reporter.event("start_model", round=record.round, source="derived")
    else:
        got = fetch_start_params(relay, record, ctx.manifest)
        reporter.event("start_model", round=record.round, source="download")
    _keep(ctx, record.round, got[0])
    # the previous model is no longer needed for a rebuild (overlapped rounds start the
    # next round from this round's start model: the one before it goes)
    keep = 2 if ctx.manifest.round.overlap else 1
    if len(records) > keep:
        held_model_path(ctx, records[-1 - keep].round).unlink(missing_ok=True)
    return got[1]


def held_start_params(ctx: RunContext, relay: RelayClient, record: RoundOpen) -> dict[str, Tensor]:
    """Round ``record``'s start model: the copy this island keeps when its bytes are the
    record's, else downloaded and verified."""
    path = held_model_path(ctx, record.round)
    held = path.read_bytes() if path.is_file() else b""
    if held and blob_hash(held) == record.start_model_sha256:
        return decode_model_blob(held, ctx.manifest.model, record.start_model_sha256)
    return fetch_start_params(relay, record, ctx.manifest)[1]
