"""Deadlines every party derives from a round's public schedule, and the floor under the
dispute answer deadline.

A dispute's first answer waits for the party's replay of the disputed segment (``J``
inner steps on its own samples), so ``dispute.answer_rounds`` must hold that replay.
The manifest states no device speed, so :func:`answer_floor_rounds` assumes a reference
device per class: ``REFERENCE_FLOP_PER_S``, the training rate of the devnet's busy
two-core machine for a CPU run (its proxy preset measured 0.2 s per sample-step at 64
tokens, about 8 GFLOP/s: ``devnet.config.SAMPLE_STEP_S``) and a deliberately low 1
TFLOP/s for an accelerator. One segment costs ``6 * param_count * seq_len`` FLOPs per
sample-step (forward and backward; every stored weight counted, so a mixture of experts
is over-counted, the safe side) on the largest per-device batch the layout limits allow
(``max_micro_batches * micro_batch_size`` samples); the floor is that replay times
``ANSWER_MARGIN`` (a machine three times busier), in beacon rounds of ``period_s``,
plus ``ANSWER_FIXED_ROUNDS`` (seeing the query at the next poll, and the post landing).
:func:`check_answer_deadline` refuses a manifest under it (``hypertrain run init`` and
the service's ``create-run``), naming the smallest deadline that holds.
"""

from __future__ import annotations

import math
from typing import Final

from hypertrain.protocol.errors import DeadlineError
from hypertrain.protocol.manifest import RunManifest, param_count

# Beacon rounds after the audit selection within which an update's first arrival on the
# relay still counts for the merge (slack for a relay clock behind the service's); the
# aggregator and every recomputation apply the same number.
ARRIVAL_MARGIN_ROUNDS: Final = 2


def upload_deadline(selection_beacon_round: int, audit_window_rounds: int) -> int:
    """Last beacon round at which a selected checkpoint may still arrive: half the audit
    window after the selection (the other half is left for the replay itself)."""
    return selection_beacon_round + max(1, audit_window_rounds // 2)


def updates_by_round(selection_beacon_round: int) -> int:
    """Last beacon round (by the relay's arrival record) at which a committed update may
    first arrive and still count for its round's merge: an island uploads its update
    before it commits, so an honest one is always in time, and an update first seen
    later is ``missing_blob`` for every party, whenever it asks."""
    return selection_beacon_round + ARRIVAL_MARGIN_ROUNDS


QUICKNET_PERIOD_S: Final = 3  # seconds per round of drand quicknet, the network's beacon
REFERENCE_FLOP_PER_S: Final = {"cpu": 8e9, "accelerator": 1e12}
ANSWER_MARGIN: Final = 3
ANSWER_FIXED_ROUNDS: Final = 2


def segment_replay_s(manifest: RunManifest) -> float:
    """Seconds the reference device of the run's class takes to replay one segment."""
    limits = manifest.round.limits
    samples = limits.max_micro_batches * manifest.round.layout.micro_batch_size
    flop = 6 * param_count(manifest.model) * manifest.data.seq_len * samples
    device = "cpu" if manifest.determinism.device_class.startswith("cpu") else "accelerator"
    return manifest.round.checkpoint_interval * flop / REFERENCE_FLOP_PER_S[device]


def answer_floor_rounds(manifest: RunManifest, period_s: float = QUICKNET_PERIOD_S) -> int:
    """The shortest ``dispute.answer_rounds`` that holds one answer's replay, with margin."""
    if period_s <= 0:
        raise DeadlineError(f"the beacon period must be positive, not {period_s} s")
    replay = ANSWER_MARGIN * segment_replay_s(manifest)
    return ANSWER_FIXED_ROUNDS + math.ceil(replay / period_s - 1e-9)


def check_answer_deadline(manifest: RunManifest, period_s: float = QUICKNET_PERIOD_S) -> None:
    """Refuse dispute deadlines shorter than one answer's work (:func:`answer_floor_rounds`):
    ``answer_rounds``, and ``clock_rounds`` (a party's whole game holds its first answer)."""
    floor = answer_floor_rounds(manifest, period_s)
    spec = manifest.dispute
    short = [f"{name} = {value}" for name, value in
             (("answer_rounds", spec.answer_rounds), ("clock_rounds", spec.clock_rounds))
             if value < floor]  # fmt: skip
    if short:
        raise DeadlineError(
            f"dispute.{' and dispute.'.join(short)} beacon rounds cannot hold one answer:"
            f" replaying a segment of {manifest.round.checkpoint_interval} steps takes about"
            f" {segment_replay_s(manifest):.1f} s on a reference"
            f" {manifest.determinism.device_class} device, so with margin {ANSWER_MARGIN} at"
            f" {period_s:g} s per round an answer needs {floor} rounds: set"
            f" dispute.answer_rounds and dispute.clock_rounds to at least {floor}, or lower J"
            " (checkpoint_interval) or round.layout_limits.max_micro_batches"
        )
