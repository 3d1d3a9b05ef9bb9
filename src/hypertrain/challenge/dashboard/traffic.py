"""The service's traffic section: each round's bytes as ``protocol.traffic`` counts them.

Counted from what passed through the service plus sizes the protocol fixes exactly:

* ``commits``: the signed commit envelopes as stored (their canonical JSON);
* ``updates``: the update bytes each commit declares (the relay refuses any other size);
* ``broadcasts``: an island that committed in the previous round holds that round's start
  model, so it receives the previous merge's broadcast (its size is on the signed
  merge-tape message) and rebuilds the new start model from it;
* ``joins``: every other committing island (round 0, a newcomer, one that missed a
  round, or a run that publishes no broadcast) downloads the full start model, 4 bytes
  per parameter (the float32 model blob, header excluded), except in round 0 of a run
  without a warm start, whose start model (the seed's initial parameters) every island
  computes itself (``miner.start_model.derived_genesis``);
* ``checkpoints``: one full training-state checkpoint per segment an audit selected but
  segment 0 (its start state is public), since islands upload only those
  (``miner.checkpoints``), and under ``carry`` one carried state per audited island that
  committed the round before (the step counter, optimizer slots and residual its round
  started from, no parameters); a checkpoint's size is 4 bytes per parameter, per
  optimizer slot and per residual value, a carried state's the same without the
  parameters and with its slots in the run's carried width (per-tensor headers, well
  under 0.1%, are left out: this package does not import the trainer).

A round is a *probation* round when one of its audited islands was still in its probation
(audited because it is new, not by the rate); the others are the steady state, which
includes the forced re-audits of islands with a proven earlier fault.
"""

from __future__ import annotations

import json
import sqlite3

from hypertrain.api.models import RoundSummary
from hypertrain.challenge.dashboard.models import ExpectedTraffic
from hypertrain.challenge.store import audit_storage, commit_storage, merge_storage, rounds_storage
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import ModelSpec, RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.protocol.traffic import (
    DTYPE_BYTES,
    RoundBytes,
    TrafficRound,
    data_parallel_bytes,
    factor_words,
    uploads_per_audit,
)

FLOAT32_BYTES = DTYPE_BYTES["float32"]


def _adamw_only_params(spec: ModelSpec) -> int:
    """Parameters Muon leaves to AdamW: embeddings, head, norms and routers."""
    router = spec.moe.num_experts * spec.d_model if spec.moe is not None else 0
    head = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    norms = spec.num_layers * 2 * spec.d_model + spec.d_model
    return spec.vocab_size * spec.d_model + head + norms + spec.num_layers * router


def _slots(manifest: RunManifest, params: int) -> int:
    """Optimizer slot values: one per Muon parameter, two per AdamW parameter."""
    if manifest.inner.name == "muon":
        adamw = _adamw_only_params(manifest.model)
        return (params - adamw) + 2 * adamw
    return 2 * params


def _residual(manifest: RunManifest, params: int) -> int:
    return params if manifest.compression.error_feedback else 0


def state_bytes(manifest: RunManifest, params: int) -> int:
    """Tensor bytes of one training-state checkpoint (all float32): parameters, optimizer
    slots, residual."""
    return FLOAT32_BYTES * (params + _slots(manifest, params) + _residual(manifest, params))


def carried_bytes(manifest: RunManifest, params: int) -> int:
    """Tensor bytes of one carried state (``carry``): optimizer slots in the run's carried
    width (``inner.carried_dtype``) and a float32 residual."""
    slot = DTYPE_BYTES[manifest.inner.carried_dtype]
    return slot * _slots(manifest, params) + FLOAT32_BYTES * _residual(manifest, params)


def _committers(conn: sqlite3.Connection, run_id: str, index: int) -> set[str]:
    return set(commit_storage.commit_order(conn, run_id, index))


def _broadcast_bytes(conn: sqlite3.Connection, run_id: str, index: int) -> int | None:
    """The size of round ``index``'s published broadcast (None: none published)."""
    body = merge_storage.merge_body(conn, run_id, index)
    if body is None:
        return None
    size = json.loads(body).get("broadcast_bytes")
    return int(size) if isinstance(size, int) else None


def _not_carried(conn: sqlite3.Connection, run_id: str, index: int) -> set[str]:
    """The islands whose audits in round ``index`` upload no carried state: its open
    record starts them from the public state or lists them as stored by an auditor."""
    envelope = rounds_storage.open_envelope(conn, run_id, index)
    if envelope is None:
        return set()
    record = RoundOpen.model_validate(Envelope.model_validate_json(envelope).body)
    return set(record.fresh_start) | set(record.carry_stored)


def _audits(
    conn: sqlite3.Connection, run_id: str, index: int, carried: bool
) -> tuple[int, int, bool]:
    """(uploaded checkpoints, uploaded carried states, any island audited in its
    probation) of one round: one checkpoint per audited segment but segment 0, whose
    start state auditors derive from the public start model, and (``carried``: the run's
    ``carry`` policy) one carried state per audited island that committed in the previous
    round, the optimizer state this round started from (none for an island the
    round-open record has start fresh or lists as stored by an auditor)."""
    rows = audit_storage.audit_load(conn, run_id, index)
    segments = sum(sum(1 for k in json.loads(text) if k > 0) for text, _, _ in rows)
    states = 0
    if carried and index > 0:
        previous = _committers(conn, run_id, index - 1) - _not_carried(conn, run_id, index)
        states = len({hotkey for _, _, hotkey in rows} & previous)
    return segments, states, any(new for _, new, _ in rows)


def round_traffic(
    conn: sqlite3.Connection,
    run_id: str,
    manifest: RunManifest,
    summary: RoundSummary,
    params: int,
) -> TrafficRound:
    """The honest byte count of one round (``params`` model parameters) and its baseline."""
    index = summary.round
    islands = _committers(conn, run_id, index)
    held = _committers(conn, run_id, index - 1) & islands if index > 0 else set()
    broadcast = _broadcast_bytes(conn, run_id, index - 1) if index > 0 else None
    receivers = len(held) if broadcast is not None else 0
    derived = index == 0 and manifest.warm_start is None  # the seed's model, computed
    carried = manifest.inner.state_policy == "carry"
    segments, states, probation = _audits(conn, run_id, index, carried)
    ours = RoundBytes(
        commits=commit_storage.commit_bytes(conn, run_id, index),
        updates=summary.update_bytes,
        broadcasts=receivers * (broadcast or 0),
        checkpoints=segments * state_bytes(manifest, params)
        + states * carried_bytes(manifest, params),
        joins=0 if derived else (len(islands) - receivers) * FLOAT32_BYTES * params,
    )
    ddp = data_parallel_bytes(params, max(1, len(islands)), manifest.round.inner_steps)
    return TrafficRound(index, ours, ddp, probation)


def warm_start_bytes(manifest: RunManifest, islands: int, params: int) -> int:
    """The data-parallel bytes of the manifest's warm start on a ring of ``islands`` (the
    all-in figure counts them on both sides; 0 without a warm start)."""
    if manifest.warm_start is None:
        return 0
    return data_parallel_bytes(params, max(1, islands), manifest.warm_start.steps)


def expected_steady(
    manifest: RunManifest, counts: list[TrafficRound], islands: list[int], params: int
) -> ExpectedTraffic | None:
    """The steady state at the audit rate (:class:`ExpectedTraffic`), from the steady
    rounds' counts and each round's number of islands; None before a steady round."""
    steady = [(c, n) for c, n in zip(counts, islands, strict=True) if not c.probation]
    if not steady:
        return None
    rounds = manifest.round
    per_audit = uploads_per_audit(
        rounds.inner_steps // rounds.checkpoint_interval,
        manifest.audit.segments,
        manifest.inner.state_policy == "carry",
        manifest.audit.rate,
        carried_bytes(manifest, params) / state_bytes(manifest, params),
    )
    audits = manifest.audit.rate * sum(n for _, n in steady) / len(steady)
    other = sum(c.ours.total() - c.ours.checkpoints for c, _ in steady) / len(steady)
    ours = other + audits * per_audit * state_bytes(manifest, params)
    theirs = sum(c.data_parallel for c, _ in steady) / len(steady)
    if ours <= 0 or theirs <= 0:
        return None
    return ExpectedTraffic(
        audit_rate=manifest.audit.rate,
        audits_per_round=audits,
        uploads_per_audit=per_audit,
        bytes_per_round=round(ours),
        data_parallel_bytes_per_round=round(theirs),
        ratio=theirs / ours,
        words=factor_words(theirs / ours),
    )
