"""The manifest's ``round`` section: H, J, the island layouts a run admits, the phase
windows and overlapped rounds (re-exported by :mod:`hypertrain.protocol.manifest`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from hypertrain.protocol.section import Section as _Section


class LayoutSpec(_Section):
    """Island data-parallel layout: ranks × micro-batches per rank × samples per micro-batch.

    ``dp_ranks × micro_batches × micro_batch_size`` fixes the batch and the bytes. How the
    island runs it follows (omitted from the canonical JSON at their defaults, so older
    layouts keep their bytes; none of them changes a training byte): ``world`` processes
    (default: one per data-parallel rank; each trains ``dp_ranks / world`` of them),
    ``dp × ep = world`` with ``ep`` the expert-parallel degree (experts split over ``ep``
    processes, ``dp`` expert groups; ``ep > 1`` only for a mixture-of-experts model whose
    expert count it divides) and ``zero1`` (optimizer state sharded over the processes).
    """

    dp_ranks: int = Field(default=1, ge=1, le=1024)
    micro_batches: int = Field(default=1, ge=1, le=1024)
    micro_batch_size: int = Field(default=4, ge=1)
    world: int | None = Field(default=None, ge=1, le=1024, exclude_if=lambda v: v is None)
    dp: int | None = Field(default=None, ge=1, le=1024, exclude_if=lambda v: v is None)
    ep: int = Field(default=1, ge=1, le=256, exclude_if=lambda v: v == 1)
    zero1: bool = Field(default=False, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _processes_fit(self) -> LayoutSpec:
        world = self.world_size
        if self.dp_ranks % world:
            raise ValueError(f"{world} processes cannot split {self.dp_ranks} data-parallel ranks")
        if world % self.ep:
            raise ValueError(f"ep={self.ep} does not divide a world of {world} processes")
        if self.dp is not None and self.dp * self.ep != world:
            raise ValueError(f"dp × ep = {self.dp} × {self.ep} is not the world of {world}")
        return self

    @property
    def samples_per_step(self) -> int:
        return self.dp_ranks * self.micro_batches * self.micro_batch_size

    @property
    def world_size(self) -> int:
        """Processes of the island: ``world``, or one per data-parallel rank."""
        return self.dp_ranks if self.world is None else self.world

    @property
    def expert_groups(self) -> int:
        """``dp``: groups of ``ep`` processes, each holding every expert once."""
        return self.world_size // self.ep


class LayoutLimits(_Section):
    """The largest island layout a run admits; ``micro_batch_size`` is always the run's.

    An island's sample budget per round is ``H × samples_per_step`` of its own layout,
    so these limits cap the share one island can claim of a round.
    """

    max_dp_ranks: int = Field(default=1, ge=1, le=1024)
    max_micro_batches: int = Field(default=1, ge=1, le=1024)
    # expert-parallel degree (omitted at its default 1: expert parallelism off)
    max_ep: int = Field(default=1, ge=1, le=256, exclude_if=lambda v: v == 1)


class RoundSpec(_Section):
    """Inner steps per round, the checkpoint interval and the island layouts allowed."""

    inner_steps: int = Field(ge=1)  # H
    checkpoint_interval: int = Field(ge=1)  # J
    layout: LayoutSpec = LayoutSpec()  # the default layout (an island without one of its own)
    layout_limits: LayoutLimits | None = None  # None = no larger than ``layout``
    commit_window_rounds: int = Field(default=20, ge=1)  # beacon rounds from open to commit
    audit_window_rounds: int = Field(default=20, ge=1)
    dispute_window_rounds: int = Field(default=10, ge=0)
    # overlapped rounds (docs/protocol.md, "Overlapped rounds"): an island that committed
    # round r starts round r + 1 from round r's start model minus its share of its own
    # round-r update, so it may train while round r is audited and merged (omitted when off)
    overlap: bool = Field(default=False, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _j_divides_h(self) -> RoundSpec:
        if self.inner_steps % self.checkpoint_interval:
            raise ValueError("checkpoint_interval (J) must divide inner_steps (H)")
        problem = self.layout_problem(self.layout)
        if problem is not None:
            raise ValueError(f"the default layout is outside layout_limits: {problem}")
        return self

    @property
    def num_segments(self) -> int:
        return self.inner_steps // self.checkpoint_interval

    @property
    def limits(self) -> LayoutLimits:
        """The effective limits: ``layout_limits``, or the default layout's own size."""
        if self.layout_limits is not None:
            return self.layout_limits
        return LayoutLimits(
            max_dp_ranks=self.layout.dp_ranks,
            max_micro_batches=self.layout.micro_batches,
            max_ep=self.layout.ep,
        )

    @property
    def max_samples_per_step(self) -> int:
        limits = self.limits
        return limits.max_dp_ranks * limits.max_micro_batches * self.layout.micro_batch_size

    def layout_problem(self, layout: LayoutSpec) -> str | None:
        """Why ``layout`` is not admissible in this run, or None when it is."""
        limits = self.limits
        if layout.micro_batch_size != self.layout.micro_batch_size:
            return (
                f"micro_batch_size is {layout.micro_batch_size}, the run's is "
                f"{self.layout.micro_batch_size}"
            )
        if layout.dp_ranks > limits.max_dp_ranks:
            return f"{layout.dp_ranks} ranks exceed the limit of {limits.max_dp_ranks}"
        if layout.micro_batches > limits.max_micro_batches:
            return (
                f"{layout.micro_batches} micro-batches exceed the limit of "
                f"{limits.max_micro_batches}"
            )
        if layout.ep > limits.max_ep:
            return f"ep={layout.ep} exceeds the limit of {limits.max_ep}"
        return None

    def island_samples(self, layout: LayoutSpec) -> int:
        """An island's sample budget per round: H steps of its layout's samples per step."""
        return self.inner_steps * layout.samples_per_step
