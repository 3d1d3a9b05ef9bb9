"""The merge: screen, clip and robustly aggregate a round's updates, then the outer step.

1. *Norms.* Where the inputs name an upload deadline (``updates_by_round``), an
   update the relay's arrival record does not show by then is ``missing_blob``
   (:mod:`hypertrain.aggregator.availability`). Fetch each update (hash-checked),
   check its size against the commit and its tokens against what H steps can train,
   validate it for the model and the run's codec and compute its exact norm
   (:mod:`hypertrain.aggregator.norms`). Byte-identical
   copies of an earlier commit's update are excluded (:mod:`hypertrain.aggregator.dedup`);
   then :func:`~hypertrain.aggregator.screen.screen` rejects outliers and fixes every
   clip factor from a reference norm that only audit-proven updates set, and an update
   explained by the run's public updates in the run sketch (``MergeInputs.older`` and
   ``earlier``; :mod:`hypertrain.aggregator.sketch`) is excluded as ``near_duplicate``.
2. *Robust aggregate.* On the exact Gram matrix of the accepted updates and the last
   rounds' public ones (``MergeInputs.earlier``; :mod:`hypertrain.aggregator.aggregate`):
   copies explained by earlier updates and updates pointing against both the others
   and the audit-proven direction are excluded, and the token-weighted geometric
   median of the rest gives each update its coefficient ``a_i``.
3. *Sum.* Fetch each included update again and add ``float32(a_i * clip_i) * u_i``,
   tensor by tensor (``trainer.update.iter_decode_update``), into one accumulator.

The Gram matrix holds the included updates' encoded bytes (int8: a quarter of the model
each); the sum keeps only the start model, the momentum, the accumulator and one
decoded update alive. The order is fixed (sorted hotkeys), every decision is made in
Python floats on exact inner products and every tensor operation is elementwise
float32, so the merge is bitwise reproducible. A round where nothing survives keeps the
model and the momentum unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from hypertrain.aggregator.aggregate import robust_aggregate
from hypertrain.aggregator.availability import check_arrival
from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.dedup import exact_duplicates
from hypertrain.aggregator.errors import AggregatorError, BlobError, UpdateFormatError
from hypertrain.aggregator.norms import classify, update_norm
from hypertrain.aggregator.outer import (
    decode_outer_state,
    encode_outer_state,
    nesterov_step,
    zero_momentum,
)
from hypertrain.aggregator.robust import COPY_RESIDUAL
from hypertrain.aggregator.screen import screen
from hypertrain.aggregator.sketch import SketchCache, sketch_copies
from hypertrain.aggregator.tape import Candidate, Earlier, Excluded, Included, Tape
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import decode_model_blob, encode_model_blob
from hypertrain.trainer.broadcast import broadcast_step
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.update import iter_decode_update


@dataclass(frozen=True)
class MergeInputs:
    manifest: RunManifest
    round: int
    start_model_sha256: str
    prev_outer_state_sha256: str | None
    candidates: list[Candidate]
    collect_excluded: list[Excluded] = field(default_factory=list)
    rollback_of: str | None = None
    history_norms: list[float] = field(default_factory=list)  # trailing merged (clipped) norms
    proven: list[str] = field(default_factory=list)  # hotkeys whose update an audit proved
    earlier: list[Earlier] = field(default_factory=list)  # the last rounds' public updates
    older: list[Earlier] = field(default_factory=list)  # the run's other public updates
    sketches: SketchCache | None = field(default=None, compare=False)  # reused across rounds
    # last beacon round an update may first reach the relay and count (None: any time)
    updates_by_round: int | None = None


@dataclass(frozen=True)
class MergeResult:
    tape: Tape
    model_blob: bytes
    outer_blob: bytes
    broadcast_blob: bytes | None = None  # the int8 outer step, when the run broadcasts


def max_tokens(manifest: RunManifest) -> int:
    """The most tokens one island can train in a round (H steps of the largest layout
    the manifest's limits admit; the challenge holds each commit to its own budget)."""
    spec = manifest.round
    return spec.inner_steps * spec.max_samples_per_step * (manifest.data.seq_len - 1)


def _precheck(c: Candidate, inputs: MergeInputs, data: bytes) -> tuple[str, str] | None:
    if len(data) != c.update_bytes:
        return "wrong_size", f"update is {len(data)} bytes, the commit says {c.update_bytes}"
    limit = max_tokens(inputs.manifest)
    if not 0 < c.tokens <= limit:
        return "tokens_out_of_range", f"{c.tokens} tokens claimed, a round trains at most {limit}"
    return None


def norms_pass(inputs: MergeInputs, blobs: BlobSource) -> tuple[dict[str, float], list[Excluded]]:
    """Pass 1: exact norms of the valid candidates, and the failures."""
    shapes = param_shapes(inputs.manifest.model)
    norms: dict[str, float] = {}
    failed: list[Excluded] = []
    for c in sorted(inputs.candidates, key=lambda c: c.hotkey):
        try:
            if inputs.updates_by_round is not None:
                check_arrival(blobs, c.update_sha256, inputs.updates_by_round)
            data = blobs.get(c.update_sha256)
            problem = _precheck(c, inputs, data)
            if problem is None:
                norms[c.hotkey] = update_norm(data, shapes, inputs.manifest.compression)
        except (BlobError, UpdateFormatError) as exc:
            problem = (exc.reason, str(exc))
        if problem is not None:
            failed.append(_excluded(c, *problem))
    return norms, failed


def _excluded(c: Candidate, reason: str, detail: str) -> Excluded:
    return Excluded(
        hotkey=c.hotkey, update_sha256=c.update_sha256, tokens=c.tokens, stage="screen",
        reason=reason, detail=detail[:2048],
    )  # fmt: skip


def weighted_sum(
    included: Iterable[Included], inputs: MergeInputs, blobs: BlobSource
) -> dict[str, Tensor]:
    """Pass 2: ``sum_i float32(weight_i * clip_i) * update_i`` in the given order."""
    shapes = param_shapes(inputs.manifest.model)
    acc = {name: torch.zeros(shape) for name, shape in shapes}
    for inc in included:
        coef = torch.tensor(np.float32(inc.weight * inc.clip_factor))
        try:
            data = blobs.get(inc.update_sha256)
            for name, tensor in iter_decode_update(data, inputs.manifest.compression, shapes):
                acc[name].add_(tensor.mul_(coef))
        except CodecError as exc:  # pass 1 validated it; only a changed blob gets here
            raise classify(exc) from None
    return acc


@dataclass(frozen=True)
class Selection:
    included: list[Included]  # in hotkey order, with clip factor and median coefficient
    excluded: list[Excluded]  # screen-stage exclusions
    median_norm: float
    clip_threshold: float


def select(inputs: MergeInputs, blobs: BlobSource) -> Selection:
    """Norms, exact copies, the norm screen and the robust aggregate: who is merged, how."""
    norms, failed = norms_pass(inputs, blobs)
    by_key = {c.hotkey: c for c in inputs.candidates}
    arrival = [c.hotkey for c in sorted(inputs.candidates, key=lambda c: (c.seq, c.hotkey))]
    copies = exact_duplicates([(h, by_key[h].update_sha256) for h in arrival if h in norms])
    norms = {h: n for h, n in norms.items() if h not in copies}
    screened = screen(norms, inputs.manifest.outer, inputs.history_norms, inputs.proven)
    old = older_copies(inputs, blobs, {h: by_key[h].update_sha256 for h in screened.clip})
    clip = {h: f for h, f in screened.clip.items() if h not in old}
    agg = robust_aggregate(
        clip,
        {h: by_key[h].tokens for h in clip},
        arrival,
        lambda h: blobs.get(by_key[h].update_sha256),
        param_shapes(inputs.manifest.model),
        inputs.manifest.compression,
        earlier=[(e, blobs.get(e.update_sha256)) for e in inputs.earlier],
        proven=inputs.proven,
    )
    rejected = {**copies, **screened.rejected, **old, **agg.rejected}
    failed += [_excluded(by_key[h], r, d) for h, (r, d) in sorted(rejected.items())]
    included = [
        Included(hotkey=h, update_sha256=by_key[h].update_sha256, tokens=by_key[h].tokens,
                 norm=norms[h], clip_factor=screened.clip[h], weight=agg.weights[h])
        for h in sorted(agg.weights)
    ]  # fmt: skip
    return Selection(included, failed, screened.median, screened.clip_threshold)


def older_copies(
    inputs: MergeInputs, blobs: BlobSource, shas: dict[str, str]
) -> dict[str, tuple[ExclusionReason, str]]:
    """hotkey -> ``near_duplicate`` for each screened update the run sketch explains by
    public updates of the run (none without ``older``: such tapes merge as before)."""
    if not inputs.older or not shas:
        return {}
    cache = inputs.sketches or SketchCache(inputs.manifest.run_id)
    shapes, codec = param_shapes(inputs.manifest.model), inputs.manifest.compression
    public = [
        (f"{e.hotkey} of round {e.round}", cache.of(e.update_sha256, blobs, shapes, codec))
        for e in [*inputs.older, *inputs.earlier]
    ]
    mine = {h: cache.of(sha, blobs, shapes, codec) for h, sha in shas.items()}
    return {
        h: ("near_duplicate", f"explained by public updates of the run ({', '.join(names)}):"
            f" residual {res:.6f} of its sketch's norm (threshold {COPY_RESIDUAL})")
        for h, (res, names) in sketch_copies(mine, public).items()
    }  # fmt: skip


def merge(inputs: MergeInputs, blobs: BlobSource) -> MergeResult:
    """Run both passes and the outer step; returns the tape and the two new blobs."""
    spec, outer = inputs.manifest.model, inputs.manifest.outer
    hotkeys = [c.hotkey for c in inputs.candidates]
    if len(set(hotkeys)) != len(hotkeys):
        raise AggregatorError("two candidate updates from the same hotkey")
    start = decode_model_blob(blobs.get(inputs.start_model_sha256), spec)
    momentum = zero_momentum(spec)
    if inputs.prev_outer_state_sha256 is not None:
        momentum, _ = decode_outer_state(blobs.get(inputs.prev_outer_state_sha256), spec)
    chosen = select(inputs, blobs)
    included = chosen.included
    new_params, new_momentum = start, momentum
    if included:
        delta = weighted_sum(included, inputs, blobs)
        new_params, new_momentum = {}, {}
        for name, _ in param_shapes(spec):
            new_params[name], new_momentum[name] = nesterov_step(
                start[name], delta.pop(name), momentum[name], outer
            )
    broadcast = None
    if outer.broadcast == "int8":  # the model is the start minus the decoded broadcast
        broadcast, new_params = broadcast_step(
            start, new_params, spec, inputs.manifest.compression.block_size
        )
    model_blob = encode_model_blob(new_params, spec)
    outer_blob = encode_outer_state(new_momentum, spec, inputs.round)
    tape = Tape(
        run_id=inputs.manifest.run_id,
        round=inputs.round,
        manifest=inputs.manifest,
        manifest_digest=inputs.manifest.digest(),
        start_model_sha256=inputs.start_model_sha256,
        prev_outer_state_sha256=inputs.prev_outer_state_sha256,
        median_norm=chosen.median_norm,
        clip_threshold=chosen.clip_threshold,
        total_tokens=sum(i.tokens for i in included),
        included=included,
        excluded=sorted(
            inputs.collect_excluded + chosen.excluded, key=lambda e: (e.hotkey, e.stage)
        ),
        candidates=sorted(inputs.candidates, key=lambda c: c.hotkey),
        new_outer_state_sha256=hashlib.sha256(outer_blob).hexdigest(),
        new_model_sha256=hashlib.sha256(model_blob).hexdigest(),
        rollback_of=inputs.rollback_of,
        history_norms=list(inputs.history_norms),
        proven=sorted(inputs.proven),
        earlier=list(inputs.earlier),
        older=list(inputs.older),
        updates_by_round=inputs.updates_by_round,
    )
    return MergeResult(tape, model_blob, outer_blob, broadcast)
