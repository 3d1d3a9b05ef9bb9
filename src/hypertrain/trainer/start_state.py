"""The start state of a round: a public function of public records, under either policy.

Checkpoint 0 of every round must be exactly the state these functions build, so an
auditor can check the *whole* start state (parameters, optimizer moments, step
counter, error-feedback residual) against leaf 0, not just the parameters.

* ``reset`` (:func:`reset_state`): the merged model, zero optimizer state, zero
  residual, and the global step counter at the round's start (``TrainConfig.
  round_start_step``: the warm start's steps plus ``round * H``). Anyone holding the merged
  model derives it.
* ``carry`` (:func:`carry_state`): the merged model's parameters with the state the
  island's previous round carried (:func:`carried_of`: that round's final step counter
  and optimizer slots and, with error feedback, the residual its update left behind),
  which the island uploads when audited (``trainer.carried``). An island with no commit
  in the previous round starts from the ``reset`` state.
* overlapped rounds (:func:`overlap_params`): the parameters either policy starts from
  are the previous round's start model minus the island's share (``1 / M``, ``M`` that
  round's roster) of its own decoded previous update, instead of the merged model.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.carried import CarriedState, is_carried
from hypertrain.trainer.state import RESIDUAL_PREFIX, StateConfig, TrainState
from hypertrain.trainer.update import build_update, decode_update


def reset_state(config: StateConfig, merged: Mapping[str, Tensor], step: int) -> TrainState:
    """Merged parameters, zero optimizer state and residual, step counter ``step`` (the
    round's first global step: ``TrainConfig.round_start_step``)."""
    if step < 0:
        raise ValueError(f"the step counter must be >= 0, got {step}")
    tensors: dict[str, Tensor] = {}
    for spec in config.layout():
        value = merged.get(spec.name)
        if spec.name.startswith("optim.") or spec.name.startswith("residual."):
            tensors[spec.name] = torch.zeros(spec.shape)
        elif value is None or tuple(value.shape) != spec.shape:
            raise ValueError(f"merged model has no parameter {spec.name!r} of shape {spec.shape}")
        else:
            tensors[spec.name] = value.detach().float().clone()
    return TrainState(step, tensors, config.digest())


def carried_of(
    final: TrainState, start_params: Mapping[str, Tensor], compression: CompressionSpec,
    residual: Mapping[str, Tensor] | None = None, *, slots: torch.dtype = torch.float32,
) -> CarriedState:  # fmt: skip
    """What a round's ``final`` state carries into the island's next round: its step
    counter, its optimizer slots in ``slots`` (the run's ``carried.slot_dtype``; rounded
    to nearest-even when narrower) and, with error feedback, the residual the round's
    update (built from ``start_params``, the round's start model) left behind;
    ``residual``: that update's, when the caller already built it. ValueError if a slot
    is not finite in ``slots`` (a finite float32 beyond bfloat16's range rounds to Inf)."""
    tensors = {
        name: t.detach().to(slots) if name.startswith("optim.") else t
        for name, t in final.tensors.items()
        if is_carried(name)
    }
    for name, t in tensors.items():  # a finite slot beyond the width's range rounds to Inf
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} is not finite in {t.dtype}: no reader accepts it")
    if compression.error_feedback:
        if residual is None:
            residual = build_update(start_params, final, compression).residual or {}
        for name, value in residual.items():
            tensors[RESIDUAL_PREFIX + name] = value.detach().float().clone()
    return CarriedState(final.step, tensors, final.config_digest)


def carry_state(
    carried: CarriedState, merged: Mapping[str, Tensor], config: StateConfig
) -> TrainState:
    """The ``carry`` start state: the merged model's parameters with ``carried``'s step
    counter, optimizer slots (widened to float32) and residual, in ``config``'s layout
    order."""
    if carried.config_digest != config.digest():
        raise ValueError("the carried state was written for another model or optimizer")
    tensors: dict[str, Tensor] = {}
    for spec in config.layout():
        value = carried.tensors.get(spec.name) if is_carried(spec.name) else merged.get(spec.name)
        if value is None or tuple(value.shape) != spec.shape:
            raise ValueError(f"the carry start state has no tensor {spec.name!r} of {spec.shape}")
        tensors[spec.name] = value.detach().float().clone()
    return TrainState(carried.step, tensors, carried.config_digest)


def overlap_params(
    previous_start: Mapping[str, Tensor], own_update: bytes, roster_size: int,
    compression: CompressionSpec,
) -> dict[str, Tensor]:  # fmt: skip
    """An overlapped round's start parameters: ``previous_start - u / M`` with ``u`` the
    island's decoded update of the previous round and ``M`` that round's roster size.

    Two correctly rounded float32 operations per element (a division, a subtraction),
    never a fused multiply-add, so every machine derives the same bytes."""
    if roster_size < 1:
        raise ValueError(f"a roster of {roster_size} islands has no share")
    delta = decode_update(own_update, compression)
    out: dict[str, Tensor] = {}
    for name, value in previous_start.items():
        d = delta.get(name)
        if d is None or d.shape != value.shape:
            shape = tuple(value.shape)
            raise ValueError(f"the previous update has no tensor {name!r} of shape {shape}")
        share = torch.div(d.float(), float(roster_size))
        out[name] = torch.sub(value.detach().float(), share)
    return out
