"""The start state of a round: a public function of public records, under either policy.

Checkpoint 0 of every round must be exactly the state these functions build, so an
auditor can check the *whole* start state (parameters, optimizer moments, step
counter, error-feedback residual) against leaf 0, not just the parameters.

* ``reset`` (:func:`reset_state`): the merged model, zero optimizer state, zero
  residual, and the global step counter at the round's start (``TrainConfig.
  round_start_step``: the warm start's steps plus ``round * H``). Anyone holding the merged
  model derives it.
* ``carry`` (:func:`carry_state`): the island's final state of the previous round
  (a committed leaf), with the merged model's parameters and, with error feedback,
  the residual the previous round's update left behind (recomputed from that round's
  start model and final state, so it is public too). An island with no commit in the
  previous round starts from the ``reset`` state.
* overlapped rounds (:func:`overlap_params`): the parameters either policy starts from
  are the previous round's start model minus the island's share (``1 / M``, ``M`` that
  round's roster) of its own decoded previous update, instead of the merged model.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer.state import StateConfig, TrainState
from hypertrain.trainer.update import build_update, decode_update, next_round_state


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


def carry_state(
    prev_final: TrainState,
    prev_start_params: Mapping[str, Tensor],
    merged: Mapping[str, Tensor],
    compression: CompressionSpec,
) -> TrainState:
    """``next_round_state(prev_final, merged)`` with the public residual of the last update."""
    residual = None
    if compression.error_feedback:
        residual = build_update(prev_start_params, prev_final, compression).residual
    return next_round_state(prev_final, merged, residual)


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
