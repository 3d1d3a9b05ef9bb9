"""A round's merge as one pure function: the candidates' updates in, the next model out.

:func:`combine` is the whole numeric merge, with no relay, no blob store and no tape.
Given the manifest, the round's start model and outer momentum, the candidates (hotkey,
update hash, verified tokens, committed size, commit order) and ``fetch`` (an update's
bytes by hash), it

1. checks each update's size against its commit and its tokens against what H steps can
   train, validates it for the model and the run's codec and computes its exact norm
   (:mod:`hypertrain.aggregator.norms`);
2. excludes byte-identical copies of an earlier commit (:mod:`~hypertrain.aggregator.dedup`),
   screens the norms against the reference that audit-proven norms set and fixes every
   clip factor (:mod:`~hypertrain.aggregator.screen`), lets ``near_copies`` exclude copies
   of older public updates (the merge passes the run sketch's), and takes the robust
   aggregate's coefficient ``a_i`` of each update left (:mod:`~hypertrain.aggregator.aggregate`);
3. adds ``float32(a_i * clip_i) * u_i`` tensor by tensor in hotkey order, one decoded
   update alive at a time, applies the outer step
   (:func:`~hypertrain.aggregator.outer.nesterov_step`) and, when the run broadcasts,
   makes the model the start minus the decoded int8 step (``trainer.broadcast``).

:func:`hypertrain.aggregator.merge.merge` wraps it with its blob I/O and its tape, so the
runner, ``verify-tape``, witnesses and rollbacks all merge through it, and the parity
simulator calls it on its islands' updates: every loss the simulator measures went through
the product's merge. Every decision is made in Python floats on exact norms and inner
products and every tensor operation is elementwise float32, so the same inputs give the
same bytes on every machine. A round where nothing survives keeps the model and the
momentum (and broadcasts a zero step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import torch
from torch import Tensor

from hypertrain.aggregator.aggregate import Rejected, robust_aggregate
from hypertrain.aggregator.dedup import exact_duplicates
from hypertrain.aggregator.errors import BlobError, UpdateFormatError
from hypertrain.aggregator.norms import classify, update_norm
from hypertrain.aggregator.outer import nesterov_step
from hypertrain.aggregator.screen import screen
from hypertrain.aggregator.tape import Candidate, Earlier, Excluded, Included
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.broadcast import broadcast_step
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.update import iter_decode_update

Params = dict[str, Tensor]
Fetch = Callable[[str], bytes]  # an update's bytes by SHA-256; BlobError when unavailable
NearCopies = Callable[[Mapping[str, str]], Rejected]  # screened hotkey -> sha: the copies


@dataclass(frozen=True, slots=True)
class Trust:
    """What the merge trusts beyond the round's own updates: the proven norms of earlier
    rounds (``screen.proven_history``), the hotkeys an audit proved this round, and the
    last rounds' public updates (``aggregate.earlier_updates``)."""

    history_norms: Sequence[float] = ()
    proven: Sequence[str] = ()
    earlier: Sequence[Earlier] = ()


NO_TRUST: Final = Trust()  # only the manifest's reference norm, if set, is trusted


@dataclass(frozen=True)
class Selection:
    included: list[Included]  # in hotkey order, with clip factor and median coefficient
    excluded: list[Excluded]  # screen-stage: invalid updates, then the rejected (hotkey order)
    median_norm: float
    clip_threshold: float
    proven: list[str]  # sorted; with ``included`` what ``screen.proven_history`` reads


@dataclass(frozen=True)
class Combined:
    params: Params  # the new model
    momentum: Params  # the new outer momentum
    broadcast: bytes | None  # the int8 outer step, when the run broadcasts
    selection: Selection


def max_tokens(manifest: RunManifest) -> int:
    """The most tokens one island can train in a round (H steps of the largest layout
    the manifest's limits admit; the challenge holds each commit to its own budget)."""
    spec = manifest.round
    return spec.inner_steps * spec.max_samples_per_step * (manifest.data.seq_len - 1)


def screen_excluded(c: Candidate, reason: str, detail: str) -> Excluded:
    """A screen-stage exclusion of ``c`` (the detail cut to the tape's limit)."""
    return Excluded(
        hotkey=c.hotkey, update_sha256=c.update_sha256, tokens=c.tokens, stage="screen",
        reason=reason, detail=detail[:2048],
    )  # fmt: skip


def _precheck(c: Candidate, manifest: RunManifest, data: bytes) -> tuple[str, str] | None:
    if len(data) != c.update_bytes:
        return "wrong_size", f"update is {len(data)} bytes, the commit says {c.update_bytes}"
    limit = max_tokens(manifest)
    if not 0 < c.tokens <= limit:
        return "tokens_out_of_range", f"{c.tokens} tokens claimed, a round trains at most {limit}"
    return None


def norms_pass(
    manifest: RunManifest, candidates: Sequence[Candidate], fetch: Fetch
) -> tuple[dict[str, float], list[Excluded]]:
    """Pass 1: exact norms of the valid candidates, and the failures."""
    shapes = param_shapes(manifest.model)
    norms: dict[str, float] = {}
    failed: list[Excluded] = []
    for c in sorted(candidates, key=lambda c: c.hotkey):
        try:
            data = fetch(c.update_sha256)
            problem = _precheck(c, manifest, data)
            if problem is None:
                norms[c.hotkey] = update_norm(data, shapes, manifest.compression)
        except (BlobError, UpdateFormatError) as exc:
            problem = (exc.reason, str(exc))
        if problem is not None:
            failed.append(screen_excluded(c, *problem))
    return norms, failed


def select(
    manifest: RunManifest,
    candidates: Sequence[Candidate],
    fetch: Fetch,
    trust: Trust = NO_TRUST,
    near_copies: NearCopies | None = None,
) -> Selection:
    """Norms, exact copies, the norm screen and the robust aggregate: who is merged, how."""
    norms, failed = norms_pass(manifest, candidates, fetch)
    by_key = {c.hotkey: c for c in candidates}
    arrival = [c.hotkey for c in sorted(candidates, key=lambda c: (c.seq, c.hotkey))]
    copies = exact_duplicates([(h, by_key[h].update_sha256) for h in arrival if h in norms])
    norms = {h: n for h, n in norms.items() if h not in copies}
    screened = screen(norms, manifest.outer, trust.history_norms, trust.proven)
    shas = {h: by_key[h].update_sha256 for h in screened.clip}
    old = {} if near_copies is None else near_copies(shas)
    clip = {h: f for h, f in screened.clip.items() if h not in old}
    agg = robust_aggregate(
        clip,
        {h: by_key[h].tokens for h in clip},
        arrival,
        lambda h: fetch(by_key[h].update_sha256),
        param_shapes(manifest.model),
        manifest.compression,
        earlier=[(e, fetch(e.update_sha256)) for e in trust.earlier],
        proven=trust.proven,
    )
    rejected = {**copies, **screened.rejected, **old, **agg.rejected}
    failed += [screen_excluded(by_key[h], r, d) for h, (r, d) in sorted(rejected.items())]
    included = [
        Included(hotkey=h, update_sha256=by_key[h].update_sha256, tokens=by_key[h].tokens,
                 norm=norms[h], clip_factor=screened.clip[h], weight=agg.weights[h])
        for h in sorted(agg.weights)
    ]  # fmt: skip
    return Selection(
        included, failed, screened.median, screened.clip_threshold, sorted(trust.proven)
    )


def weighted_sum(manifest: RunManifest, included: Iterable[Included], fetch: Fetch) -> Params:
    """Pass 2: ``sum_i float32(weight_i * clip_i) * update_i`` in the given order."""
    shapes = param_shapes(manifest.model)
    acc = {name: torch.zeros(shape) for name, shape in shapes}
    for inc in included:
        coef = torch.tensor(np.float32(inc.weight * inc.clip_factor))
        try:
            data = fetch(inc.update_sha256)
            for name, tensor in iter_decode_update(data, manifest.compression, shapes):
                acc[name].add_(tensor.mul_(coef))
        except CodecError as exc:  # pass 1 validated it; only a changed blob gets here
            raise classify(exc) from None
    return acc


def outer_step(
    manifest: RunManifest, start: Params, momentum: Params, delta: Params | None
) -> tuple[Params, Params, bytes | None]:
    """(model, momentum, broadcast) after the outer step on the merged ``delta`` (None:
    nothing merged, the model and momentum stay)."""
    spec = manifest.model
    new_params, new_momentum = start, momentum
    if delta is not None:
        new_params, new_momentum = {}, {}
        for name, _ in param_shapes(spec):
            new_params[name], new_momentum[name] = nesterov_step(
                start[name], delta.pop(name), momentum[name], manifest.outer
            )
    broadcast = None
    bits = manifest.outer.broadcast_bits
    if bits is not None:  # the model is the start minus the decoded step
        compression = manifest.compression
        broadcast, new_params = broadcast_step(
            start, new_params, spec, compression.block_size, bits, compression.entropy
        )
    return new_params, new_momentum, broadcast


def combine(
    manifest: RunManifest,
    start: Params,
    momentum: Params,
    candidates: Sequence[Candidate],
    fetch: Fetch,
    *,
    trust: Trust = NO_TRUST,
    near_copies: NearCopies | None = None,
) -> Combined:
    """The merge of ``candidates`` into the model after ``start`` (module docstring)."""
    chosen = select(manifest, candidates, fetch, trust, near_copies)
    delta = weighted_sum(manifest, chosen.included, fetch) if chosen.included else None
    params, new_momentum, broadcast = outer_step(manifest, start, momentum, delta)
    return Combined(params, new_momentum, broadcast, chosen)
