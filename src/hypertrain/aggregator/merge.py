"""The merge: a round's tape from its candidates, with the blob I/O around the pure merge.

1. *Availability.* Where the inputs name an upload deadline (``updates_by_round``), an
   update the relay's arrival record does not show by then is ``missing_blob``
   (:mod:`hypertrain.aggregator.availability`).
2. *The merge itself* (:func:`hypertrain.aggregator.combine.combine`, a pure function of
   the start model, the momentum, the candidates and their bytes): every update is
   fetched (hash-checked), checked against its commit and the run's codec and normed
   exactly (:mod:`hypertrain.aggregator.norms`); byte-identical copies of an earlier
   commit's update are excluded (:mod:`hypertrain.aggregator.dedup`); then
   :func:`~hypertrain.aggregator.screen.screen` rejects outliers and fixes every clip
   factor from a reference norm that only audit-proven updates set, and an update
   explained by the run's public updates in the run sketch (``MergeInputs.older`` and
   ``earlier``; :mod:`hypertrain.aggregator.sketch`, the hook this module passes) is
   excluded as ``near_duplicate``. On the exact Gram matrix of the accepted updates and
   the last rounds' public ones (``MergeInputs.earlier``;
   :mod:`hypertrain.aggregator.aggregate`) copies explained by earlier updates and
   updates pointing against both the others and the audit-proven direction are
   excluded, and the token-weighted geometric median of the rest gives each update its
   coefficient ``a_i``. Each included update is fetched again and
   ``float32(a_i * clip_i) * u_i`` added, tensor by tensor
   (``trainer.update.iter_decode_update``), into one accumulator; then the outer step,
   and the int8 broadcast when the run asks for one.
3. *Outputs.* The model blob, the outer-state blob and the tape naming every input and
   decision.

The Gram matrix holds the included updates' encoded bytes (int8: a quarter of the model
each); the sum keeps only the start model, the momentum, the accumulator and one
decoded update alive. The order is fixed (sorted hotkeys), every decision is made in
Python floats on exact inner products and every tensor operation is elementwise
float32, so the merge is bitwise reproducible. A round where nothing survives keeps the
model and the momentum unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from hypertrain.aggregator.availability import check_arrival
from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.combine import Trust, combine, screen_excluded
from hypertrain.aggregator.combine import max_tokens as max_tokens  # re-exported
from hypertrain.aggregator.errors import AggregatorError, BlobError
from hypertrain.aggregator.outer import decode_outer_state, encode_outer_state, zero_momentum
from hypertrain.aggregator.robust import COPY_RESIDUAL
from hypertrain.aggregator.sketch import SketchCache, sketch_copies
from hypertrain.aggregator.tape import Candidate, Earlier, Excluded, Tape
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import decode_model_blob, encode_model_blob
from hypertrain.trainer.model import param_shapes


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
    broadcast_blob: bytes | None = None  # the encoded outer step, when the run broadcasts


def late_updates(inputs: MergeInputs, blobs: BlobSource) -> list[Excluded]:
    """The candidates whose update did not reach the relay by the upload deadline (none
    when the inputs name no deadline), as ``missing_blob`` exclusions in hotkey order."""
    if inputs.updates_by_round is None:
        return []
    late: list[Excluded] = []
    for c in sorted(inputs.candidates, key=lambda c: c.hotkey):
        try:
            check_arrival(blobs, c.update_sha256, inputs.updates_by_round)
        except BlobError as exc:
            late.append(screen_excluded(c, exc.reason, str(exc)))
    return late


def older_copies(
    inputs: MergeInputs, blobs: BlobSource, shas: Mapping[str, str]
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
    """Check availability, merge (:func:`~hypertrain.aggregator.combine.combine`) and
    record it; returns the tape and the new blobs."""
    spec = inputs.manifest.model
    hotkeys = [c.hotkey for c in inputs.candidates]
    if len(set(hotkeys)) != len(hotkeys):
        raise AggregatorError("two candidate updates from the same hotkey")
    start = decode_model_blob(blobs.get(inputs.start_model_sha256), spec)
    momentum = zero_momentum(spec)
    if inputs.prev_outer_state_sha256 is not None:
        momentum, _ = decode_outer_state(blobs.get(inputs.prev_outer_state_sha256), spec)
    late = late_updates(inputs, blobs)
    gone = {e.hotkey for e in late}
    merged = combine(
        inputs.manifest,
        start,
        momentum,
        [c for c in inputs.candidates if c.hotkey not in gone],
        blobs.get,
        trust=Trust(inputs.history_norms, inputs.proven, inputs.earlier),
        near_copies=lambda shas: older_copies(inputs, blobs, shas),
    )
    chosen = merged.selection
    model_blob = encode_model_blob(merged.params, spec)
    outer_blob = encode_outer_state(merged.momentum, spec, inputs.round)
    tape = Tape(
        run_id=inputs.manifest.run_id,
        round=inputs.round,
        manifest=inputs.manifest,
        manifest_digest=inputs.manifest.digest(),
        start_model_sha256=inputs.start_model_sha256,
        prev_outer_state_sha256=inputs.prev_outer_state_sha256,
        median_norm=chosen.median_norm,
        clip_threshold=chosen.clip_threshold,
        total_tokens=sum(i.tokens for i in chosen.included),
        included=chosen.included,
        excluded=sorted(
            inputs.collect_excluded + late + chosen.excluded, key=lambda e: (e.hotkey, e.stage)
        ),
        candidates=sorted(inputs.candidates, key=lambda c: c.hotkey),
        new_outer_state_sha256=hashlib.sha256(outer_blob).hexdigest(),
        new_model_sha256=hashlib.sha256(model_blob).hexdigest(),
        rollback_of=inputs.rollback_of,
        history_norms=list(inputs.history_norms),
        proven=chosen.proven,
        earlier=list(inputs.earlier),
        older=list(inputs.older),
        updates_by_round=inputs.updates_by_round,
    )
    return MergeResult(tape, model_blob, outer_blob, merged.broadcast)
