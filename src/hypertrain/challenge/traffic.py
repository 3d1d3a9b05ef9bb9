"""Honest per-round traffic: every byte an island must move, against data-parallel training.

Counted from what passed through the service plus sizes the protocol fixes exactly:

* ``commits``: the signed commit envelopes as stored (their canonical JSON);
* ``updates``: the update bytes each commit declares (the relay refuses any other size);
* ``checkpoints``: one full training-state checkpoint per segment an audit selected, since
  islands upload only those (``miner.checkpoints``); its size is 4 bytes per parameter,
  per optimizer slot and per residual value (the per-tensor headers, well under 0.1%,
  are left out: this package does not import the trainer);
* ``model_download``: each committing island fetches the round's start model, 4 bytes
  per parameter (the float32 model blob, header excluded).

The reference is ``protocol.traffic``: a bf16 ring all-reduce every step over as many
devices as islands, ``islands x 2(n-1)/n x 2 bytes x params x H`` per round.
"""

from __future__ import annotations

import json
from typing import Any

from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.manifest import ModelSpec, RunManifest
from hypertrain.protocol.traffic import FORMULA, ddp_bytes_total, honest_ratio


def _adamw_only_params(spec: ModelSpec) -> int:
    """Parameters Muon leaves to AdamW: embeddings, head, norms and routers."""
    router = spec.moe.num_experts * spec.d_model if spec.moe is not None else 0
    head = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    norms = spec.num_layers * 2 * spec.d_model + spec.d_model
    return spec.vocab_size * spec.d_model + head + norms + spec.num_layers * router


def state_bytes(manifest: RunManifest, params: int) -> int:
    """Tensor bytes of one training-state checkpoint: parameters, optimizer slots, residual."""
    if manifest.inner.name == "muon":
        adamw = _adamw_only_params(manifest.model)
        slots = (params - adamw) + 2 * adamw
    else:
        slots = 2 * params
    residual = params if manifest.compression.error_feedback else 0
    return 4 * (params + slots + residual)


def _round_counts(state: ServiceState, run_id: str, index: int) -> tuple[int, int]:
    """(commit envelope bytes, audited segments) of one round."""
    commit = state.conn.execute(
        "SELECT COALESCE(SUM(LENGTH(envelope)), 0) AS n FROM commits"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    segments = sum(
        len(json.loads(row["segments"]))
        for row in state.conn.execute(
            "SELECT segments FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
        )
    )
    return int(commit["n"]), segments


def round_traffic(
    state: ServiceState, run_id: str, manifest: RunManifest, summary: dict[str, Any], params: int
) -> dict[str, Any]:
    """The honest byte count of one round (``params`` model parameters) against
    data-parallel training."""
    islands = int(summary["commits"])
    commit_bytes, segments = _round_counts(state, run_id, int(summary["round"]))
    moved = {
        "commits": commit_bytes,
        "updates": int(summary["update_bytes"]),
        "checkpoints": segments * state_bytes(manifest, params),
        "model_download": islands * 4 * params,
    }
    ddp = ddp_bytes_total(params, max(1, islands), manifest.round.inner_steps)
    return {
        "traffic": moved,
        "honest_bytes": sum(moved.values()),
        "ddp_ring_bytes": ddp,
        "honest_saved_factor": honest_ratio(ddp, moved),
    }


def traffic_totals(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Run totals of :func:`round_traffic` rows, with the formula stated."""
    honest = sum(r["honest_bytes"] for r in rounds)
    ddp = sum(r["ddp_ring_bytes"] for r in rounds)
    parts: dict[str, int] = {}
    for r in rounds:
        for k, v in r["traffic"].items():
            parts[k] = parts.get(k, 0) + v
    return {
        "honest_bytes": honest,
        "ddp_ring_bytes": ddp,
        "honest_saved_factor": ddp / honest if honest else None,
        "traffic": parts,
        "ddp_formula": FORMULA,
    }
