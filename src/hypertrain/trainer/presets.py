"""Named model presets and their exact size: parameter count and FLOPs per token.

``50m`` is the brief's dense model; ``proxy`` trains visibly on two CPU cores;
``tiny`` and ``tiny-moe`` make a unit-test step take milliseconds; ``proxy-moe`` is the
small mixture-of-experts variant. Presets are plain :class:`ModelSpec` values, so a
variant is ``spec.model_copy(update={...})`` (use :func:`with_vocab` for the vocabulary:
the devnet trains its own BPE tokenizer and sets the size it got).
"""

from __future__ import annotations

from typing import Final

from hypertrain.protocol.manifest import ModelSpec, MoESpec, ffn_params
from hypertrain.protocol.manifest import param_count as param_count  # re-exported
from hypertrain.trainer.errors import TrainerError

PRESETS: Final[dict[str, ModelSpec]] = {
    "50m": ModelSpec(
        preset="50m",
        vocab_size=50_000,
        d_model=512,
        num_layers=8,
        num_heads=8,
        head_dim=64,
        ffn_hidden=1536,
        context_length=2048,
    ),
    "proxy": ModelSpec(
        preset="proxy",
        vocab_size=4096,
        d_model=256,
        num_layers=4,
        num_heads=4,
        head_dim=64,
        ffn_hidden=704,
        context_length=256,
    ),
    "proxy-moe": ModelSpec(
        preset="proxy-moe",
        vocab_size=4096,
        d_model=256,
        num_layers=4,
        num_heads=4,
        head_dim=64,
        ffn_hidden=352,
        context_length=256,
        moe=MoESpec(num_experts=4, top_k=2),
    ),
    "tiny": ModelSpec(
        preset="tiny",
        vocab_size=64,
        d_model=32,
        num_layers=2,
        num_heads=2,
        head_dim=16,
        ffn_hidden=64,
        context_length=32,
    ),
    "tiny-moe": ModelSpec(
        preset="tiny-moe",
        vocab_size=64,
        d_model=32,
        num_layers=2,
        num_heads=2,
        head_dim=16,
        ffn_hidden=32,
        context_length=32,
        moe=MoESpec(num_experts=4, top_k=2),
    ),
}


def get_preset(name: str) -> ModelSpec:
    """The preset called ``name``; raises :class:`TrainerError` listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise TrainerError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def with_vocab(spec: ModelSpec, vocab_size: int) -> ModelSpec:
    """``spec`` with another vocabulary size (validated like any ModelSpec)."""
    return ModelSpec.model_validate({**spec.model_dump(), "vocab_size": vocab_size})


def proxy(vocab_size: int = 4096) -> ModelSpec:
    """The proxy preset for a tokenizer of ``vocab_size`` tokens."""
    return with_vocab(PRESETS["proxy"], vocab_size)


def active_matmul_params(spec: ModelSpec) -> int:
    """Weights multiplied per token in a forward pass (LM head included, norms excluded)."""
    attn = 4 * spec.d_model * spec.d_model
    return spec.num_layers * (attn + ffn_params(spec)[1]) + spec.vocab_size * spec.d_model


def flops_per_token(spec: ModelSpec, seq_len: int | None = None) -> dict[str, int]:
    """Forward and training FLOPs per token (multiply-add = 2 FLOPs).

    Matmuls: 2 x active weights. Attention scores and weighted sum: 2 x 2 x layers x
    d_model x T for context T (full, not halved for the causal mask, as in the
    PaLM appendix). Training = 3 x forward (backward costs twice the forward).
    """
    t = spec.context_length if seq_len is None else seq_len
    forward = 2 * active_matmul_params(spec) + 4 * spec.num_layers * spec.d_model * t
    return {"forward": forward, "train": 3 * forward}
