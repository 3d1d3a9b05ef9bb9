"""The manifest sections of how updates are made and merged: the codec and the outer step.

``compression`` says how an island encodes its pseudo-gradient (blockwise absmax at 8, 4
or 2 bits, or sparse top-k; error feedback or not), ``outer`` how the aggregator merges
the accepted updates and what islands receive (the broadcast). Both are sections of
:class:`hypertrain.protocol.manifest.RunManifest`, which re-exports them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hypertrain.protocol.section import Section as _Section


class OuterOptimSpec(_Section):
    """Outer Nesterov step applied by the aggregator to the averaged pseudo-gradient."""

    lr: float = Field(default=0.7, gt=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)
    nesterov: bool = True
    clip_to_median_factor: float = Field(default=2.0, gt=0)
    reject_norm_factor: float = Field(default=10.0, gt=1)
    # "int8" ("int4", "int2"): the merged model is the start model minus the outer step
    # encoded at that width (trainer.codec), and islands receive that step instead of the
    # model (protocol.md, "Start-model broadcast"). Omitted from the canonical JSON when
    # unset, so older manifests keep their hash (and their merges publish the float32
    # model only).
    broadcast: Literal["int8", "int4", "int2"] | None = Field(
        default=None, exclude_if=lambda v: v is None
    )

    # A trusted update norm the operator vouches for (e.g. from a calibration run): it joins
    # the audit-proven norms of the merge's reference (omitted from the canonical JSON
    # when unset, so manifests without it keep their hash).
    reference_norm: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, exclude_if=lambda v: v is None
    )

    @property
    def broadcast_bits(self) -> int | None:
        """The broadcast's code width (None: no broadcast)."""
        return None if self.broadcast is None else int(self.broadcast[3:])


class SparseSpec(_Section):
    """Chunked top-k with low-bit values (``trainer.sparse_codec``) instead of int8."""

    chunk_size: int = Field(default=4096, ge=8, le=1 << 20)
    topk_per_chunk: int = Field(default=64, ge=1)
    value_bits: Literal[2, 3, 4] = 2

    @model_validator(mode="after")
    def _k_fits(self) -> SparseSpec:
        if self.topk_per_chunk > self.chunk_size:
            raise ValueError("topk_per_chunk cannot exceed chunk_size")
        return self


class CompressionSpec(_Section):
    """Compression of the pseudo-gradient: int8 blockwise absmax, or sparse when ``sparse``
    is set (omitted from the canonical JSON when unset, so int8 manifests keep their hash)."""

    block_size: int = Field(default=256, ge=8, le=1 << 20)
    error_feedback: bool = False
    sparse: SparseSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    # Code width of the blockwise codec (trainer.codec: 8, 4 or 2 bits); omitted from the
    # canonical JSON at 8, so int8 manifests keep their hash.
    bits: Literal[8, 4, 2] = Field(default=8, exclude_if=lambda v: v == 8)
    # Error feedback's decay (SparseLoCo's accumulator): the island encodes
    # ``delta + decay * residual``, so unsent mass fades instead of waiting forever. Omitted
    # from the canonical JSON at 1 (the plain residual), so earlier manifests keep their hash.
    error_feedback_decay: float = Field(
        default=1.0, gt=0, le=1, allow_inf_nan=False, exclude_if=lambda v: v == 1.0
    )
    # The blockwise codes entropy coded (trainer.entropy: canonical Huffman, lossless), in
    # updates and in the broadcast: 4- and 2-bit codes only. Omitted from the canonical
    # JSON when off, so earlier manifests keep their hash.
    entropy: bool = Field(default=False, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _sparse_needs_feedback(self) -> CompressionSpec:
        if self.sparse is not None and not self.error_feedback:
            raise ValueError("sparse compression needs error_feedback (unsent mass is carried)")
        if self.error_feedback_decay != 1.0 and not self.error_feedback:
            raise ValueError("error_feedback_decay needs error_feedback (it decays the residual)")
        if self.sparse is not None and self.bits != 8:
            raise ValueError("bits is the blockwise codec's; sparse sets its own value_bits")
        if self.entropy and (self.sparse is not None or self.bits == 8):
            raise ValueError("entropy coding is the 4- and 2-bit blockwise codecs' (bits 4 or 2)")
        return self

    @property
    def codec(self) -> Literal["int8", "int4", "int2", "sparse"]:
        if self.sparse is not None:
            return "sparse"
        return {8: "int8", 4: "int4", 2: "int2"}[self.bits]  # type: ignore[return-value]
