"""A complete run manifest from a preset, a prepared dataset and this machine's record.

:func:`build_manifest` fills every section (the service adds only the coordinator);
:func:`commented` renders it as JSON with a ``//`` comment line above each section,
which ``challenge create-run`` and every other manifest reader accept
(:mod:`hypertrain.protocol.manifest_file`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from hypertrain.protocol.deadlines import (
    QUICKNET_PERIOD_S,
    answer_floor_rounds,
    check_answer_deadline,
)
from hypertrain.protocol.manifest import (
    AdmissionSpec,
    AuditSpec,
    DisputeSpec,
    RewardSpec,
    RunManifest,
)
from hypertrain.protocol.recipe import (
    CHECKPOINT_INTERVAL,
    COMPRESSION,
    INNER_OPTIMIZER,
    INNER_STATE,
    INNER_STEPS,
    OUTER_STEP,
    WARM_START_PERCENT,
    warm_start_steps,
)

if TYPE_CHECKING:
    from hypertrain.ops.admission_size import DeviceCost

SECTION_NOTES: Final = {
    "run_id": "the run's name; every signed message names it",
    "seed": "seeds the genesis model; with the dataset it fixes every byte of training",
    "model": "decoder shape (pre-norm, RoPE, SwiGLU, tied head); vocab from the dataset",
    "inner": "inner optimizer of every island (H steps per round) and its LR schedule",
    "outer": "outer step of the aggregator (plain averaging, docs/parity.md), norm clipping"
    " and rejection",
    "round": "H (inner_steps), J (checkpoint_interval), layouts, phase windows in"
    " beacon rounds (a phase closes early once its work is in) and, with overlap, islands"
    " that train round r + 1 while round r is audited and merged",
    "compression": "blockwise compression of the pseudo-gradient (bits: 8, 4 or 2)",
    "data": "the dataset pinned by its Merkle root, descriptor and tokenizer hashes",
    "audit": "share of islands audited per round, J-segments replayed, probation rounds",
    "reward": "integer pool per round and vesting; a proven fault burns the unvested rest",
    "admission": "a join is admitted only on a fresh workload that a worker recomputed;"
    " workload_steps sized for the run's device class (or the local 8 steps, --local)",
    "determinism": "what a replay must match bit for bit (from this machine)",
    "selfcheck_reference": "admission workload hash per accepted device class",
    "dispute": "bond (a tenth of the round pool) and deadlines of a dispute; list the"
    " SS58 of each referee in referees, or a game reaching one operation is upheld",
    "honeypots": "commitment to the operator's honeypot list (python -m"
    " hypertrain.honeypot.commit LIST) and the round after which it is revealed",
    "coordinator": "filled in and signed by the service at create-run",
    "warm_start": "data-parallel steps before round 0 (--warm-start-percent, docs/parity.md):"
    " train them with hypertrain run warm-start and give the aggregator --genesis-model",
}


WARM_START_ISLANDS = 8  # the default warm-start batch stands in for this many islands
# The economics ``run init`` writes are the manifest model's own defaults, so a hand-written
# manifest and a generated one agree (docs/mechanism.md, "What each strategy earns and
# loses at the defaults", computed from these by benchmarks/strategy_table.py).
_AUDIT: Final = AuditSpec()
_REWARD: Final = RewardSpec()
LOCAL_WORKLOAD_STEPS: Final = AdmissionSpec().workload_steps  # bounds nothing: local runs only
SIZING_FILL: Final = 0.6  # share of the answer window the sized workload takes (size-admission)


class AdmissionSizingError(ValueError):
    """``run init`` was asked for a non-local run without an admission workload sized for
    its device class."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    run_id: str
    preset: str = "proxy"
    dataset_dir: Path
    seed: int = 0
    inner_steps: int = INNER_STEPS  # the recipe's H (protocol.recipe)
    rounds: int = 100  # rounds the LR schedule plans (total_steps = rounds × H)
    checkpoint_interval: int = CHECKPOINT_INTERVAL  # 0: the whole round (J = H)
    micro_batch_size: int = 2
    max_micro_batches: int = 3
    commit_window_rounds: int = 120
    audit_window_rounds: int = 120
    dispute_window_rounds: int = 10
    audit_rate: float = _AUDIT.rate
    audit_segments: int = _AUDIT.segments
    probation_rounds: int = _AUDIT.probation_rounds
    pool_per_round: int = _REWARD.pool_per_round
    vesting_rounds: int = _REWARD.vesting_rounds
    threads: int = 1
    warm_start_percent: int = WARM_START_PERCENT  # of all steps, data-parallel before round 0
    warm_start_batch: int = 0  # samples per warm-start step (0: WARM_START_ISLANDS islands')
    admission_workload_steps: int = 0  # 0: unsized (sized for a class, or --local's 8)
    admission_window_rounds: int = 2
    admission_device_class: str = ""  # size the workload on this machine, of this class
    local: bool = False  # a run on one machine: the manifest's 8-step workload is enough
    dispute_answer_rounds: int = 0  # 0: sized to one segment's replay (protocol.deadlines)
    beacon_period_s: int = QUICKNET_PERIOD_S  # seconds per beacon round the deadlines fit
    device: str = "cpu"
    overlap: bool = False  # overlapped rounds (docs/protocol.md, "Overlapped rounds")
    optimizer: str = INNER_OPTIMIZER  # the islands' inner optimizer (inner.name)

    def __post_init__(self) -> None:
        if self.checkpoint_interval == 0:  # the recipe's default: one segment, J = H
            object.__setattr__(self, "checkpoint_interval", self.inner_steps)


def build_manifest(opts: RunOptions) -> dict[str, Any]:
    """Every section of the manifest, checked by the same model the service uses."""
    import torch

    from hypertrain.data.dataset import Dataset
    from hypertrain.data.descriptor import DESCRIPTOR_NAME
    from hypertrain.miner.admission import device_class, workload_hash
    from hypertrain.trainer.determinism import configure_determinism
    from hypertrain.trainer.presets import get_preset, with_vocab

    dataset = Dataset(opts.dataset_dir / DESCRIPTOR_NAME)
    spec = with_vocab(get_preset(opts.preset), dataset.descriptor.vocab_size)
    if dataset.seq_len > spec.context_length:
        spec = spec.model_copy(update={"context_length": dataset.seq_len})
    device = torch.device(opts.device)
    round_steps = opts.rounds * opts.inner_steps
    warm = warm_start_section(opts, round_steps)
    if warm is not None and warm["samples_per_step"] > dataset.split().train_count:
        raise ValueError(
            f"a warm-start step of {warm['samples_per_step']} samples does not fit the"
            f" dataset's training split of {dataset.split().train_count}: lower"
            " --warm-start-batch"
        )
    doc: dict[str, Any] = {
        "run_id": opts.run_id,
        "seed": opts.seed,
        "model": spec.model_dump(mode="json"),
        "inner": {
            **INNER_STATE,
            "name": opts.optimizer,
            "warmup_steps": 2,
            "total_steps": round_steps + (warm or {}).get("steps", 0),
        },
        "outer": dict(OUTER_STEP),
        "round": {
            "inner_steps": opts.inner_steps,
            "checkpoint_interval": opts.checkpoint_interval,
            "layout": {"micro_batch_size": opts.micro_batch_size},
            "layout_limits": {"max_dp_ranks": 1, "max_micro_batches": opts.max_micro_batches},
            "commit_window_rounds": opts.commit_window_rounds,
            "audit_window_rounds": opts.audit_window_rounds,
            "dispute_window_rounds": opts.dispute_window_rounds,
            **({"overlap": True} if opts.overlap else {}),
        },
        "compression": dict(COMPRESSION),
        "data": dataset.descriptor.data_spec().model_dump(mode="json"),
        "audit": {
            "rate": opts.audit_rate,
            "segments": opts.audit_segments,
            "probation_rounds": opts.probation_rounds,
        },
        "reward": {"pool_per_round": opts.pool_per_round, "vesting_rounds": opts.vesting_rounds},
        "admission": {
            "workload_steps": admission_workload_steps(opts, device),
            "answer_window_rounds": opts.admission_window_rounds,
        },
        "determinism": configure_determinism(opts.threads, opts.device).model_dump(mode="json"),
        "selfcheck_reference": {device_class(device): workload_hash(device)},
        **({"warm_start": warm} if warm else {}),
    }
    doc["dispute"] = dispute_section(opts, RunManifest.model_validate(doc))
    # Fill every default in, so the file shows the whole run; the service checks it again.
    full = RunManifest.model_validate(doc).model_dump(mode="json")
    full.pop("coordinator", None)
    return full


def admission_workload_steps(
    opts: RunOptions, device: Any, measure: Callable[[Any], DeviceCost] | None = None
) -> int:
    """The admission workload's length: the local 8 steps only with ``local``; else the
    operator's sized value (``run size-admission``), or measured here on ``device`` when
    it is of ``admission_device_class`` (docs/mechanism.md, "What one device can answer
    for"). Anything else is refused: the 8-step workload lets one core answer for dozens
    of hotkeys inside the answer window."""
    given = opts.admission_workload_steps
    if opts.admission_device_class and given:
        raise AdmissionSizingError(
            "give --admission-workload-steps or --admission-device-class, not both"
        )
    if opts.local:
        return given or LOCAL_WORKLOAD_STEPS
    if opts.admission_device_class:
        return _measured_steps(opts, device, measure)
    if given > LOCAL_WORKLOAD_STEPS:
        return given
    raise AdmissionSizingError(
        f"an admission workload of {given or LOCAL_WORKLOAD_STEPS} steps is for a local run"
        " only (one core answers for dozens of hotkeys inside the answer window): pass"
        " --admission-device-class CLASS on a machine of the run's device class to size it"
        " here, --admission-workload-steps N from `hypertrain run size-admission` run on"
        " one, or --local for a network on one machine"
    )


def _measured_steps(
    opts: RunOptions, device: Any, measure: Callable[[Any], DeviceCost] | None
) -> int:
    """``workload_steps`` that fill ``SIZING_FILL`` of the answer window on ``device``."""
    from hypertrain.ops import admission_size
    from hypertrain.trainer.selfcheck import device_class

    here = device_class(device)
    if here != opts.admission_device_class:
        raise AdmissionSizingError(
            f"--admission-device-class {opts.admission_device_class} cannot be measured on"
            f" this machine's {opts.device} ({here}): run init on a machine of that class, or"
            " pass --admission-workload-steps N from `hypertrain run size-admission` there"
        )
    window_s = opts.admission_window_rounds * opts.beacon_period_s
    cost = (measure or admission_size.measure)(device)
    return admission_size.size(cost, window_s, SIZING_FILL).workload_steps


def dispute_section(opts: RunOptions, manifest: RunManifest) -> dict[str, int]:
    """The bond, sized as docs/mechanism.md sizes it (a tenth of the round's pool), and
    deadlines that hold one answer's replay (``protocol.deadlines``): the answer deadline
    given, refused under the floor, or else the default raised to it."""
    floor = answer_floor_rounds(manifest, opts.beacon_period_s)
    defaults = DisputeSpec()
    answer = opts.dispute_answer_rounds or max(defaults.answer_rounds, floor)
    section = {
        "bond": opts.pool_per_round // 10,
        "answer_rounds": answer,
        "clock_rounds": max(defaults.clock_rounds, 2 * answer),
    }
    sized = manifest.model_copy(update={"dispute": DisputeSpec.model_validate(section)})
    check_answer_deadline(sized, opts.beacon_period_s)
    return section


def warm_start_section(opts: RunOptions, round_steps: int) -> dict[str, int] | None:
    """The warm start: ``warm_start_percent`` of all steps (warm start and rounds), on
    ``warm_start_batch`` samples per step; None for 0 %."""
    if opts.warm_start_batch < 0:
        raise ValueError(f"--warm-start-batch must be >= 0, got {opts.warm_start_batch}")
    steps = warm_start_steps(round_steps, opts.warm_start_percent)
    if steps == 0:
        return None
    batch = opts.warm_start_batch or WARM_START_ISLANDS * opts.micro_batch_size
    return {"steps": steps, "samples_per_step": batch}


def commented(doc: dict[str, Any]) -> str:
    """The manifest as JSON, one ``//`` line explaining each top-level section."""
    lines = [
        "// Hypertrain run manifest (hypertrain run init). Lines starting with // are",
        "// comments; create the run with: hypertrain challenge create-run --manifest FILE",
        "{",
    ]
    keys = list(doc)
    for n, key in enumerate(keys):
        note = SECTION_NOTES.get(key)
        if note:
            lines.append(f"  // {key}: {note}")
        body = json.dumps(doc[key], indent=2).replace("\n", "\n  ")
        lines.append(f"  {json.dumps(key)}: {body}{',' if n < len(keys) - 1 else ''}")
    lines.append("}")
    return "\n".join(lines) + "\n"
