"""The run manifest: every public input a training segment depends on.

The coordinator signs the manifest (canonical JSON in an envelope); miners and
auditors verify it before doing anything. Sections mirror the config tree
(``model``, ``inner``, ``outer``, ``round``, ``compression``, ``data``, ``audit``,
``reward``) plus the determinism record an auditor must match. Cross-field rules
(J divides H, heads × head_dim = d_model, …) are validators here, so a bad manifest
is refused where it is parsed. All sections are frozen and reject unknown keys.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import MANIFEST, tagged_hash
from hypertrain.protocol.round_spec import LayoutLimits as LayoutLimits
from hypertrain.protocol.round_spec import LayoutSpec as LayoutSpec
from hypertrain.protocol.round_spec import RoundSpec as RoundSpec
from hypertrain.protocol.section import Section as _Section
from hypertrain.protocol.update_specs import CompressionSpec as CompressionSpec
from hypertrain.protocol.update_specs import OuterOptimSpec as OuterOptimSpec
from hypertrain.protocol.update_specs import SparseSpec as SparseSpec

HexDigest = str
_HEX64 = r"^[0-9a-f]{64}$"


class MoESpec(_Section):
    """Mixture-of-experts feed-forward: top-k routing over ``num_experts``."""

    num_experts: int = Field(ge=2, le=256)
    top_k: int = Field(ge=1, le=8)
    capacity_factor: float | None = Field(default=None, gt=0)  # None = no-drop
    aux_loss_coef: float = Field(default=0.01, ge=0)

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise ValueError("top_k cannot exceed num_experts")
        return self


class ModelSpec(_Section):
    """Decoder-only transformer shape (pre-norm, RoPE, SwiGLU, tied LM head)."""

    preset: str = "custom"
    vocab_size: int = Field(ge=2, le=1 << 20)
    d_model: int = Field(ge=8)
    num_layers: int = Field(ge=1)
    num_heads: int = Field(ge=1)
    head_dim: int = Field(ge=2)
    ffn_hidden: int = Field(ge=1)
    context_length: int = Field(ge=2)
    tied_embeddings: bool = True
    rope_theta: float = Field(default=10000.0, gt=0)
    norm_eps: float = Field(default=1e-5, gt=0)
    init_std: float = Field(default=0.02, gt=0)
    moe: MoESpec | None = None

    @model_validator(mode="after")
    def _heads_fit(self) -> ModelSpec:
        if self.num_heads * self.head_dim != self.d_model:
            raise ValueError("num_heads * head_dim must equal d_model")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for RoPE")
        return self


class InnerOptimSpec(_Section):
    """Inner optimizer (per island, H steps per round)."""

    name: Literal["adamw", "muon"] = "adamw"
    lr: float = Field(default=3e-3, gt=0)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = Field(default=1e-8, gt=0)
    weight_decay: float = Field(default=0.1, ge=0)
    warmup_steps: int = Field(default=10, ge=0)
    total_steps: int = Field(default=1000, ge=1)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    grad_clip: float | None = Field(default=1.0, gt=0)
    muon_lr: float = Field(default=0.02, gt=0)
    muon_momentum: float = Field(default=0.95, ge=0, lt=1)
    muon_ns_steps: int = Field(default=5, ge=1, le=20)
    state_policy: Literal["reset", "carry"] = "reset"  # reset: start state public (mechanism.md)
    # The width the optimizer slots are carried in between rounds under ``carry``:
    # ``bfloat16`` rounds them at each round's end (trainer.carried), half the bytes an
    # audit fetches. Absent from the canonical bytes when float32, so older manifests keep
    # their hash.
    carried_dtype: Literal["float32", "bfloat16"] = Field(
        default="float32", exclude_if=lambda v: v == "float32"
    )

    @model_validator(mode="after")
    def _carried_needs_carry(self) -> InnerOptimSpec:
        if self.carried_dtype != "float32" and self.state_policy != "carry":
            raise ValueError(
                f"carried_dtype {self.carried_dtype} needs state_policy carry (reset carries"
                " nothing between rounds)"
            )
        return self


class DataSpec(_Section):
    """Which dataset and tokenizer, pinned by hash."""

    dataset_root: HexDigest = Field(pattern=_HEX64)
    descriptor_sha256: HexDigest = Field(pattern=_HEX64)
    tokenizer_sha256: HexDigest = Field(pattern=_HEX64)
    sample_count: int = Field(ge=1)
    seq_len: int = Field(ge=2)


class AuditSpec(_Section):
    rate: float = Field(default=0.1, ge=0, le=1)
    segments: int = Field(default=3, ge=0)
    probation_rounds: int = Field(default=2, ge=0)


class AdmissionSpec(_Section):
    """The admission challenge: a workload seeded by a beacon round after the join request.

    ``workload_steps`` sizes the workload so that one device of the run's class needs
    most of ``answer_window_rounds`` for it; a device answering for others misses it.
    On by default: a permissionless run admits only a device that computed the answer.
    ``challenge: false`` admits on the self-reported hash, for a closed network whose
    islands the operator vets (a copied public hash passes it).
    """

    challenge: bool = True
    delay_rounds: int = Field(default=1, ge=1, le=1000)  # seed round = join round + delay
    answer_window_rounds: int = Field(default=2, ge=1, le=1000)  # after the seed round
    workload_steps: int = Field(default=8, ge=1, le=1_000_000)


class RewardSpec(_Section):
    pool_per_round: int = Field(default=1_000_000_000, ge=0)
    vesting_rounds: int = Field(default=20, ge=1)  # sized in docs/mechanism.md (economics)


class DisputeSpec(_Section):
    """How a judged island contests a mismatch verdict (see docs/mechanism.md, Disputes).

    ``bond``: escrow (ledger base units) an island must hold to open a dispute; it is
    burned with the fault when the verdict is upheld (sized in docs/mechanism.md against
    the delay one dispute can cause). ``fanout``: state hashes asked per bisection
    query. Deadlines are in beacon rounds: ``answer_rounds`` per message,
    ``clock_rounds`` per party for the whole game, ``referee_rounds`` per referee
    deadline, extended at most ``referee_extensions`` times before the verdict is upheld
    (the deterministic fallback when ``referees`` is empty or silent). ``referees``: SS58
    keys whose rulings the service accepts (never the auditor that gave the verdict).
    """

    bond: int = Field(default=100_000_000, ge=0)
    fanout: int = Field(default=1, ge=1, le=255)
    answer_rounds: int = Field(default=10, ge=1)
    clock_rounds: int = Field(default=60, ge=1)
    referee_rounds: int = Field(default=10, ge=1)
    referee_extensions: int = Field(default=2, ge=0, le=16)
    referees: list[str] = Field(default_factory=list, max_length=64)


class HoneypotSpec(_Section):
    """The operator's commitment to its honeypot list, revealed after ``reveal_round``.

    ``commitment`` is ``protocol.honeypots.commitment(list)`` (empty: no honeypots);
    ``reveal_round`` is a round index after which the list may be published.
    """

    commitment: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")
    reveal_round: int = Field(default=0, ge=0)


class WarmStartSpec(_Section):
    """Data-parallel steps before round 0 (docs/parity.md: the measured recipe's warm start).

    The operator trains ``steps`` steps of the inner optimizer on ``samples_per_step``
    samples each (one model, the global batch) from the seed's initial model, on the
    training split in a public keyed order (``data.assignment.warm_start_ids``); the
    result's parameters are round 0's start model. The schedule counts these steps:
    round ``r`` starts at global step ``steps + r * H``. Anyone can replay it
    (``hypertrain run warm-start --expect-sha256``)."""

    steps: int = Field(ge=1, le=1_000_000)
    samples_per_step: int = Field(ge=1, le=1_048_576)


class DeterminismRecord(_Section):
    """What a replayer must match bit for bit; produced by the trainer's determinism module."""

    torch_version: str
    num_threads: int = Field(ge=1)
    device_class: str
    dtype: Literal["float32", "bfloat16"] = "float32"
    settings: dict[str, str] = Field(default_factory=dict)


class RunManifest(_Section):
    """Everything public about a run."""

    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    seed: int = Field(ge=0, le=2**53 - 1)
    model: ModelSpec
    inner: InnerOptimSpec = InnerOptimSpec()
    outer: OuterOptimSpec = OuterOptimSpec()
    round: RoundSpec
    compression: CompressionSpec = CompressionSpec()
    data: DataSpec
    audit: AuditSpec = AuditSpec()
    reward: RewardSpec = RewardSpec()
    admission: AdmissionSpec = AdmissionSpec()
    determinism: DeterminismRecord
    selfcheck_reference: dict[str, str] = Field(default_factory=dict)  # device class -> hash
    coordinator: str = ""  # SS58 of the key that signs the manifest and round records
    dispute: DisputeSpec = DisputeSpec()
    honeypots: HoneypotSpec = HoneypotSpec()
    # omitted from the canonical JSON when unset, so manifests without one keep their hash
    warm_start: WarmStartSpec | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _context_fits(self) -> RunManifest:
        if self.data.seq_len > self.model.context_length:
            raise ValueError("data.seq_len exceeds model.context_length")
        if self.round.num_segments > 1 and self.audit.segments < 1:
            raise ValueError(
                "audit.segments must be at least 1 when a round has more than one segment"
                " (otherwise no non-final segment is ever audited)"
            )
        problem = self.layout_problem(self.round.layout)
        if problem is not None:
            raise ValueError(f"the default layout does not fit the model: {problem}")
        if self.warm_start is not None and self.warm_start.steps > self.inner.total_steps:
            raise ValueError(
                f"warm_start.steps ({self.warm_start.steps}) exceeds inner.total_steps"
                f" ({self.inner.total_steps}): the schedule would end before round 0"
            )
        if self.round.overlap and self.compression.error_feedback:
            raise ValueError(
                "round.overlap with compression.error_feedback is not supported: an"
                " overlapped start is not the start its residual was encoded against"
            )
        if self.compression.entropy and self.outer.broadcast == "int8":
            raise ValueError(
                "compression.entropy codes the broadcast too, and only 4- and 2-bit codes:"
                " set outer.broadcast to int4 or int2"
            )
        self._reference_is_trusted()
        return self

    def _reference_is_trusted(self) -> None:
        """The merge's reference norm comes only from audit-proven updates: without
        probation (every newcomer audited) some other trusted source must exist."""
        audit = self.audit
        if audit.probation_rounds == 0 and audit.rate < 1 and self.outer.reference_norm is None:
            raise ValueError(
                "audit.probation_rounds = 0 leaves the merge without a trusted reference norm"
                " (unaudited updates could set it): set probation_rounds >= 1, audit.rate = 1,"
                " or outer.reference_norm"
            )

    @property
    def first_round_step(self) -> int:
        """The global step round 0 starts at: the warm start's steps (0 without one)."""
        return 0 if self.warm_start is None else self.warm_start.steps

    def layout_problem(self, layout: LayoutSpec) -> str | None:
        """Why ``layout`` is not admissible in this run (limits, or experts it cannot split),
        or None when it is."""
        problem = self.round.layout_problem(layout)
        if problem is not None or layout.ep == 1:
            return problem
        if self.model.moe is None:
            return f"ep={layout.ep} needs a mixture-of-experts model"
        if self.model.moe.num_experts % layout.ep:
            return f"ep={layout.ep} does not divide {self.model.moe.num_experts} experts"
        return None

    def canonical(self) -> bytes:
        return canonical_bytes(self.model_dump(mode="json"))

    def digest(self) -> str:
        """Hex tagged hash of the canonical manifest: the run's identity for replay."""
        return tagged_hash(MANIFEST, self.canonical()).hex()


# The inner optimizers a manifest can name (``inner.name``): the devnet's and run init's
# ``--optimizer`` choices.
INNER_OPTIMIZERS: tuple[str, ...] = get_args(InnerOptimSpec.model_fields["name"].annotation)


def ffn_params(spec: ModelSpec) -> tuple[int, int]:
    """(stored, active per token) parameters of one block's feed-forward."""
    dense = 3 * spec.d_model * spec.ffn_hidden
    if spec.moe is None:
        return dense, dense
    router = spec.moe.num_experts * spec.d_model
    return spec.moe.num_experts * dense + router, spec.moe.top_k * dense + router


def param_count(spec: ModelSpec) -> int:
    """Exact number of trainable scalars (tied head counted once)."""
    attn = 4 * spec.d_model * spec.d_model
    block = attn + ffn_params(spec)[0] + 2 * spec.d_model
    head = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    return spec.vocab_size * spec.d_model + spec.num_layers * block + spec.d_model + head


def manifest_from_json(value: Any) -> RunManifest:
    return RunManifest.model_validate(value)
