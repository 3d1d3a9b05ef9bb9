"""The competition spec: what a submission may be, how it is scored and paid.

The operator writes it (``hypertrain competition create``); the service signs it.
Sections are frozen and refuse unknown keys, like the run manifest. Beacon rounds
are the only clock: eligibility delays, evaluation cycles and the epsilon schedule
are all counted in them.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import COMPETITION_SPEC, tagged_hash
from hypertrain.protocol.errors import DeadlineError
from hypertrain.protocol.manifest import DeterminismRecord

_HEX64 = r"^[0-9a-f]{64}$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArchitectureLimits(_Section):
    """The model family and its size limits, checked before any compute."""

    model_type: Literal["llama"] = "llama"
    min_params: int = Field(default=1, ge=1)
    max_params: int = Field(default=1_000_000_000, ge=1)
    max_bytes: int = Field(default=8 << 30, ge=1)
    max_context_length: int = Field(default=4096, ge=2)
    dtypes: tuple[Literal["F32", "BF16", "F16"], ...] = ("F32", "BF16")
    vocab_size: int = Field(ge=2, le=1 << 20)

    @model_validator(mode="after")
    def _range(self) -> ArchitectureLimits:
        if self.min_params > self.max_params:
            raise ValueError("min_params exceeds max_params")
        if not self.dtypes:
            raise ValueError("at least one dtype must be allowed")
        return self


EvalDType = Literal["float32", "bfloat16"]


class EvalDataSpec(_Section):
    """The public training data (pinned), the secret evaluation pool and how it is scored.

    ``dataset_root`` and ``descriptor_sha256`` pin the published dataset miners train
    on; it is never scored. Pages are drawn from a separate *pool* of ``pool_count``
    samples that only the service holds: ``pool_root`` is the Merkle root of their
    sample hashes (the dataset-root construction), committed in the signed spec, and
    each cycle reveals its pages with their proofs only once the cycle opens, after
    every eligible commitment was made; no page is ever scored twice. ``batch_pages`` and
    ``eval_dtype`` fix how every evaluator computes (both change the bits of a matmul).
    """

    dataset_root: str = Field(pattern=_HEX64)
    descriptor_sha256: str = Field(pattern=_HEX64)
    tokenizer_sha256: str = Field(pattern=_HEX64)
    pool_root: str = Field(pattern=_HEX64)
    pool_count: int = Field(ge=1, le=1 << 24)
    seq_len: int = Field(ge=2, le=1 << 16)
    pages_per_eval: int = Field(default=64, ge=1, le=65_536)
    batch_pages: int = Field(default=8, ge=1, le=1024)  # fixed so every evaluator batches alike
    # the dtype evaluators load and run a model in (each page's loss is float32 either way);
    # omitted from the canonical JSON at its default, so older specs keep their hash
    eval_dtype: EvalDType = Field(default="float32", exclude_if=lambda v: v == "float32")

    @model_validator(mode="after")
    def _pool_fits(self) -> EvalDataSpec:
        if self.pages_per_eval > self.pool_count:
            raise ValueError("pages_per_eval exceeds pool_count")
        return self


class EpsilonSchedule(_Section):
    """The advantage of the older model in a pairwise comparison.

    ``constant``: always ``start``. ``linear``: ``start`` for a model just committed,
    falling linearly to ``end`` once the *older* model of the pair is
    ``decay_rounds`` beacon rounds old, so an incumbent's advantage erodes with age.
    """

    kind: Literal["constant", "linear"] = "constant"
    start: float = Field(default=0.005, ge=0, lt=1)
    end: float = Field(default=0.005, ge=0, lt=1)
    decay_rounds: int = Field(default=1, ge=1)

    def at(self, age_rounds: int) -> float:
        """Epsilon for a pair whose older model is ``age_rounds`` beacon rounds old."""
        if self.kind == "constant":
            return self.start
        frac = min(1.0, max(0, age_rounds) / self.decay_rounds)
        return self.start + (self.end - self.start) * frac


MODEL_TIME_LIMIT_S: Final = 600.0  # the evaluator's default per-model scoring time


class CycleSpec(_Section):
    """When models become eligible and when evaluations happen (beacon rounds).

    ``model_time_limit_s``: the wall-clock seconds an evaluator may take to score one
    model (its sandbox's limit). The score window must hold it (:func:`check_score_window`,
    checked when a competition is created on the service's beacon): the default window,
    240 rounds, is 720 s on drand quicknet, the default limit plus a fifth for the fetch.
    """

    eligibility_delay_rounds: int = Field(default=10, ge=1)
    eval_interval_rounds: int = Field(default=20, ge=1)
    score_window_rounds: int = Field(default=240, ge=1)  # evaluators answer within this
    # omitted from the canonical JSON at its default, so older specs keep their hash
    model_time_limit_s: float = Field(
        default=MODEL_TIME_LIMIT_S, gt=0, le=86_400, exclude_if=lambda v: v == MODEL_TIME_LIMIT_S
    )


class RewardSpec(_Section):
    """What a cycle mints and how it is shared (see :mod:`hypertrain.competition.scoring`).

    The best model receives ``winner_share`` of the cycle's weight; the other
    counted models split the rest by a softmax of their win rates at
    ``temperature``. A model whose mean page loss is not below ``baseline_loss``
    (when set; the published loss of a reference model) is not counted.
    """

    pool_per_cycle: int = Field(default=1_000_000_000, ge=0)
    winner_share: float = Field(default=0.95, ge=0.95, le=1.0)
    baseline_loss: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    temperature: float = Field(default=0.01, gt=0, le=10)
    weight_units: int = Field(default=1_000_000, ge=1, le=10**12)
    vesting_rounds: int = Field(default=1, ge=1)


class CompetitionSpec(_Section):
    """Everything public about a competition."""

    competition_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    architecture: ArchitectureLimits
    data: EvalDataSpec
    epsilon: EpsilonSchedule = EpsilonSchedule()
    cycle: CycleSpec = CycleSpec()
    reward: RewardSpec = RewardSpec()
    # SS58 keys allowed to score; empty = the service's evaluator keys
    # (HYPERTRAIN_EVALUATOR_HOTKEYS, never the auditors), refused at creation when empty too
    evaluators: tuple[str, ...] = ()
    determinism: DeterminismRecord | None = None  # evaluators must match it when set
    coordinator: str = ""

    @model_validator(mode="after")
    def _fits(self) -> CompetitionSpec:
        if self.data.seq_len > self.architecture.max_context_length:
            raise ValueError("data.seq_len exceeds architecture.max_context_length")
        if self.determinism is not None and self.determinism.dtype != self.data.eval_dtype:
            raise ValueError(
                f"determinism.dtype {self.determinism.dtype!r} is not data.eval_dtype"
                f" {self.data.eval_dtype!r}: the record is of the evaluation it pins"
            )
        return self

    def canonical(self) -> bytes:
        return canonical_bytes(self.model_dump(mode="json"))

    def digest(self) -> str:
        return tagged_hash(COMPETITION_SPEC, self.canonical()).hex()


def check_score_window(spec: CompetitionSpec, period_s: float) -> None:
    """Refuse a score window (in beacon rounds of ``period_s``) shorter than the time an
    evaluator may take to score one model: its scores would arrive after the window."""
    cycle = spec.cycle
    window_s = cycle.score_window_rounds * period_s
    if window_s < cycle.model_time_limit_s:
        need = math.ceil(cycle.model_time_limit_s / period_s - 1e-9)
        raise DeadlineError(
            f"cycle.score_window_rounds = {cycle.score_window_rounds} is {window_s:g} s at"
            f" {period_s:g} s per beacon round, shorter than the {cycle.model_time_limit_s:g} s"
            " an evaluator may take to score one model (cycle.model_time_limit_s): set"
            f" score_window_rounds to at least {need}, or lower model_time_limit_s"
        )
