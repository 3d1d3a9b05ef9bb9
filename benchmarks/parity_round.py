"""One DiLoCo round of the parity simulator, through the product's own functions.

* **Islands** train as the miner does: ``trainer.segment.run_segment`` on the config of
  ``trainer.round_config.island_train_config`` (H inner steps at the run's global
  steps), then ``trainer.update.build_update`` (the encoded pseudo-gradient, with error
  feedback when the manifest has it).
* **The merge** is the aggregator's: ``aggregator.combine.combine``, the pure function
  ``aggregator.merge.merge`` runs for the runner, ``verify-tape`` and rollbacks (exact
  norms, exact copies, the norm screen and clip factors, the robust aggregate's weights,
  the weighted sum, the outer step, the int8 broadcast when ``outer.broadcast`` asks for
  one). Island ``i`` commits ``i``-th under the key :func:`island_key`. Every island is
  honest and proven by an audit, as in probation: each round's updates are all
  ``proven``, and the proven norms of earlier rounds join the reference as the runner
  keeps them (``screen.proven_history``). Not simulated: the screens against earlier
  rounds' public updates and the run sketch (``Trust.earlier``, ``near_copies``).
* **The next round** starts from the model islands rebuild from the broadcast
  (``trainer.broadcast.rebuild_model``, checked against the merged model's hash, as the
  miner does) or download, in the state ``trainer.start_state.reset_state`` or
  ``carry_state`` builds, per the manifest's ``inner.state_policy``.

The ``none`` codec is the harness's exact reference and no product path: each island's
pseudo-gradient is the float64 difference of two float32 states (exact), merged by
:func:`exact_merge` in float64 and rounded once, so that with outer lr 1.0 and momentum 0
one island is data-parallel training bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.combine import Combined, Selection, Trust, combine
from hypertrain.aggregator.outer import nesterov_step
from hypertrain.aggregator.screen import proven_history
from hypertrain.aggregator.tape import Candidate
from hypertrain.protocol.manifest import CompressionSpec, OuterOptimSpec, RunManifest
from hypertrain.trainer.blob import blob_hash, encode_model_blob
from hypertrain.trainer.broadcast import rebuild_model
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample, run_segment
from hypertrain.trainer.start_state import carried_of, carry_state, reset_state
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.update import build_update, decode_update

Params = dict[str, Tensor]


@dataclass(frozen=True, slots=True)
class Swarm:
    """The DiLoCo arm between rounds."""

    states: tuple[TrainState, ...]  # each island's start state of the next round
    params: Params  # the model every island holds (the last merge's)
    momentum: Params  # the aggregator's outer momentum (float64 for the exact codec)
    merges: tuple[Selection, ...] = ()  # the merges so far, newest first
    previous: Params | None = None  # the model before the last merge (overlap prototype)


@dataclass(frozen=True, slots=True)
class RoundLog:
    updates: tuple[bytes, ...]  # each island's upload (none for the exact codec)
    upload_bytes: int  # all islands' uploads
    download_bytes: int  # all islands' start models: the broadcast, else the model blob
    merge: Combined | None  # the aggregator's merge (None for the exact codec)

    @property
    def merged(self) -> int:
        """Updates the aggregator's merge included (0 for the exact codec)."""
        return len(self.merge.selection.included) if self.merge else 0

    @property
    def clipped(self) -> int:
        """Included updates scaled down to the clip threshold."""
        return sum(i.clip_factor < 1.0 for i in self.merge.selection.included) if self.merge else 0

    @property
    def excluded(self) -> int:
        """Updates the merge left out."""
        return len(self.merge.selection.excluded) if self.merge else 0


def island_key(index: int) -> str:
    """Island ``index``'s hotkey in the merge (the merge sums in sorted-key order)."""
    return f"island-{index:03d}"


def start_swarm(first: TrainState, islands: int, *, exact: bool = False) -> Swarm:
    """Round 0: every island in ``first``, zero outer momentum."""
    params = first.params()
    dtype = torch.float64 if exact else torch.float32
    momentum = {k: torch.zeros_like(v, dtype=dtype) for k, v in params.items()}
    return Swarm(tuple(first.clone() for _ in range(islands)), params, momentum)


def merge_updates(
    manifest: RunManifest,
    start: Params,
    momentum: Params,
    updates: Sequence[bytes],
    tokens: Sequence[int],
    merges: Sequence[Selection] = (),
) -> Combined:
    """The aggregator's merge of island ``i``'s ``updates[i]`` (``tokens[i]`` verified
    tokens), every island proven, after ``merges`` (newest first)."""
    blobs = MemoryBlobs()
    candidates = [
        Candidate(hotkey=island_key(i), update_sha256=blobs.put(data, kind="update", round=0),
                  tokens=t, update_bytes=len(data), seq=i)
        for i, (data, t) in enumerate(zip(updates, tokens, strict=True))
    ]  # fmt: skip
    trust = Trust(proven_history(merges), [c.hotkey for c in candidates])
    return combine(manifest, start, momentum, candidates, blobs.get, trust=trust)


def received_model(manifest: RunManifest, start: Params, merged: Combined) -> tuple[Params, int]:
    """(the model an island starts the next round from, the bytes it downloads)."""
    blob = encode_model_blob(merged.params, manifest.model)
    if merged.broadcast is None:
        return merged.params, len(blob)
    compression, bits = manifest.compression, manifest.outer.broadcast_bits or 8
    _, params = rebuild_model(
        start,
        merged.broadcast,
        manifest.model,
        compression.block_size,
        blob_hash(blob),
        bits,
        compression.entropy,
    )
    return params, len(merged.broadcast)


def carried_start(
    manifest: RunManifest, end: TrainState, start_params: Mapping[str, Tensor],
    merged: Mapping[str, Tensor],
) -> TrainState:  # fmt: skip
    """The product's ``carry`` start state: ``merged`` with what ``end`` carries."""
    config = island_train_config(manifest, 0).state_config()
    return carry_state(carried_of(end, start_params, manifest.compression), merged, config)


def next_states(
    manifest: RunManifest,
    r: int,
    starts: Sequence[TrainState],
    ends: Sequence[TrainState],
    merged: Params,
    average: tuple[str, ...] = (),
    carry_bits: int = 0,
) -> tuple[TrainState, ...]:
    """Each island's start state of round ``r + 1``, per ``inner.state_policy``
    (``average``: a prototype, not a product policy: under ``carry``, the optimizer
    tensors whose names start with one of these prefixes are replaced by their float32
    mean over the islands, as if published with the merge; ``carry_bits``, another: the
    carried moments are rounded to that width, :func:`round_moments`)."""
    if manifest.inner.state_policy == "reset":
        cfg = island_train_config(manifest, r + 1)
        first = reset_state(cfg.state_config(), merged, cfg.round_start_step(r + 1))
        return tuple(first.clone() for _ in ends)
    states = tuple(
        round_moments(carried_start(manifest, end, start.params(), merged), carry_bits)
        for start, end in zip(starts, ends, strict=True)
    )
    if not average:
        return states
    names = [k for k in states[0].tensors if k.startswith(average)]
    mean = {k: torch.stack([s.tensors[k] for s in states]).mean(0) for k in names}
    return tuple(
        TrainState(s.step, {**s.tensors, **{k: v.clone() for k, v in mean.items()}},
                   s.config_digest)
        for s in states
    )  # fmt: skip


MOMENT_BLOCK = 64  # values per scale of the 8-bit prototype


def round_moments(state: TrainState, bits: int) -> TrainState:
    """``state`` with its Adam moments rounded as a compact carried state holds them (0:
    unchanged). 16: the product's bfloat16 carried slots (``inner.carried_dtype``, through
    ``trainer.start_state.carried_of``). 8 (a prototype, not a product format): the first moment
    as blockwise absmax int8, the second as 8-bit codes of its log2 between each block's
    least and greatest positive value (zeros stay zero), so small entries keep their
    relative precision and a step never divides by a second moment rounded to zero."""
    if bits == 0:
        return state
    if bits not in (8, 16):
        raise ValueError(f"carry_bits must be 0, 8 or 16, got {bits}")
    out = dict(state.tensors)
    if bits == 16:
        carried = carried_of(state, state.params(), CompressionSpec(), slots=torch.bfloat16)
        slots = {k: v.float() for k, v in carried.tensors.items() if k.startswith("optim.")}
        return TrainState(state.step, {**out, **slots}, state.config_digest)
    for name, t in state.tensors.items():
        if not name.startswith("optim.exp_avg"):
            continue
        if name.startswith("optim.exp_avg_sq."):
            out[name] = _log8(t)
        else:
            out[name] = _absmax8(t)
    return TrainState(state.step, out, state.config_digest)


def _blocks(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    pad = (-flat.numel()) % MOMENT_BLOCK
    return torch.nn.functional.pad(flat, (0, pad)).reshape(-1, MOMENT_BLOCK)


def _absmax8(t: torch.Tensor) -> torch.Tensor:
    x = _blocks(t)
    scale = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / 127
    y = (x / scale).round().clamp(-127, 127) * scale
    return y.reshape(-1)[: t.numel()].reshape(t.shape)


def _log8(t: torch.Tensor) -> torch.Tensor:
    x = _blocks(t)
    pos = x > 0
    logs = torch.where(pos, x.clamp_min(1e-38).log2(), torch.zeros_like(x))
    lo = torch.where(pos, logs, torch.full_like(x, float("inf"))).amin(dim=1, keepdim=True)
    hi = torch.where(pos, logs, torch.full_like(x, float("-inf"))).amax(dim=1, keepdim=True)
    some = pos.any(dim=1, keepdim=True)  # a block of zeros keeps its zeros
    lo, hi = torch.where(some, lo, 0.0), torch.where(some, hi, 0.0)
    span = (hi - lo).clamp_min(1e-12)
    q = ((logs - lo) / span * 255).round()
    y = torch.where(pos, torch.exp2(lo + q * span / 255), torch.zeros_like(x))
    return y.reshape(-1)[: t.numel()].reshape(t.shape)


def exact_merge(
    global_params: Params, momentum: Params, deltas: Sequence[Params], outer: OuterOptimSpec
) -> tuple[Params, Params]:
    """The ``none`` codec's merge: float64 mean of the exact deltas, Nesterov step in float64,
    rounded once to float32 (momentum kept in float64)."""
    new_params, new_m = {}, {}
    coef = 1.0 / len(deltas)
    for name, theta in global_params.items():
        acc = torch.zeros_like(theta, dtype=torch.float64)
        for d in deltas:
            acc.add_(d[name].mul(coef))
        p, new_m[name] = nesterov_step(theta.double(), acc, momentum[name], outer)
        new_params[name] = p.float()
    return new_params, new_m


def _exact_round(
    manifest: RunManifest, swarm: Swarm, ends: Sequence[TrainState], r: int
) -> tuple[Swarm, RoundLog]:
    deltas = [
        {k: v.double() - e.params()[k].double() for k, v in s.params().items()}
        for s, e in zip(swarm.states, ends, strict=True)
    ]
    params, momentum = exact_merge(swarm.params, swarm.momentum, deltas, manifest.outer)
    p = sum(v.numel() for v in params.values())
    blob = len(encode_model_blob(params, manifest.model))
    states = next_states(manifest, r, swarm.states, ends, params)
    log = RoundLog((), len(ends) * 4 * p, len(ends) * blob, None)
    return Swarm(states, params, momentum, swarm.merges), log


def diloco_round(
    manifest: RunManifest,
    swarm: Swarm,
    samples: Sequence[Sequence[Sample]],
    r: int,
    *,
    exact: bool = False,
    average: tuple[str, ...] = (),
    overlap: str = "",
    carry_bits: int = 0,
) -> tuple[Swarm, RoundLog]:
    """Round ``r``: island ``i`` trains on ``samples[i]``, the aggregator merges, every
    island receives the model and starts round ``r + 1`` (``exact``: the ``none`` codec).

    ``overlap`` (a prototype of overlapped rounds, not a product policy): island ``i``
    starts round ``r + 1`` before round ``r``'s merge, from the last merged model it
    holds (round ``r - 1``'s), and the merge of round ``r`` still moves the aggregator's
    model, so every island receives the round's progress one round late (a delayed outer
    update). What the island adds of its own round-``r`` update (decoded, public):
    ``own`` all of it, ``half`` half, ``share`` its share of the mean (1/M), ``stale``
    none; ``lookahead`` its share plus (1 - 1/M) of the last merge's step (the others'
    progress predicted by the last round's, the same for every island)."""
    cfg = island_train_config(manifest, r)
    h = manifest.round.inner_steps
    ends = [run_segment(s, cfg, x, h) for s, x in zip(swarm.states, samples, strict=True)]
    if exact:
        return _exact_round(manifest, swarm, ends, r)
    comp = manifest.compression
    updates = [
        build_update(s.params(), e, comp).data for s, e in zip(swarm.states, ends, strict=True)
    ]
    tokens = [h * cfg.tokens_per_step] * len(ends)
    merged = merge_updates(manifest, swarm.params, swarm.momentum, updates, tokens, swarm.merges)
    params, received = received_model(manifest, swarm.params, merged)
    log = RoundLog(tuple(updates), sum(len(u) for u in updates), len(ends) * received, merged)
    if overlap:
        m = len(ends)
        weight = {"own": 1.0, "half": 0.5, "share": 1 / m, "lookahead": 1 / m, "stale": 0.0}
        held = swarm.params
        if overlap == "lookahead" and swarm.previous is not None:  # + the last merge's step
            held = {k: v + (1 - 1 / m) * (v - swarm.previous[k]) for k, v in held.items()}
        states = tuple(
            carried_start(manifest, e, s.params(), own_start(held, u, comp, weight[overlap]))
            for s, e, u in zip(swarm.states, ends, updates, strict=True)
        )
    else:
        states = next_states(manifest, r, swarm.states, ends, params, average, carry_bits)
    merges = (merged.selection, *swarm.merges)
    return Swarm(states, params, merged.momentum, merges, swarm.params), log


def own_start(
    held: Params, update: bytes, compression: CompressionSpec, weight: float = 1.0
) -> Params:
    """An overlapped round's start model: the merged model the island holds minus
    ``weight`` times its own decoded last update (its progress, rebased on the public
    model)."""
    if weight == 0.0:
        return {k: v.clone() for k, v in held.items()}
    delta = decode_update(update, compression)
    return {k: v - weight * delta[k] for k, v in held.items()}
