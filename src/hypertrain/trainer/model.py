"""The decoder as pure functions over a name -> tensor mapping.

Pre-norm blocks: x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)); then a final RMSNorm
and an LM head tied to the token embedding. Attention is causal multi-head with
rotary position embeddings on Q and K in the "rotate half" layout, so the weights are
exactly those of Hugging Face ``LlamaForCausalLM`` (names match after a ``model.``
prefix; see export.py). The feed-forward is SwiGLU, or a mixture of SwiGLU experts
(moe.py) when ``spec.moe`` is set.

Parameters are created by :func:`init_params` from ``(spec, seed)`` with a private
``torch.Generator``; global RNG state is never read. :func:`param_shapes` fixes the
canonical parameter order that the state hash and every byte format use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from hypertrain.protocol.manifest import ModelSpec, MoESpec
from hypertrain.trainer.moe import expert_shapes, moe_ffn
from hypertrain.trainer.tracing import Tracer

Params = Mapping[str, Tensor]
# (x, params, "layers.i.mlp.", moe) -> (output, balance loss); expert parallelism swaps it
MoEFn = Callable[[Tensor, Params, str, MoESpec], tuple[Tensor, Tensor]]


def _block_shapes(spec: ModelSpec, i: int) -> list[tuple[str, tuple[int, ...]]]:
    d, p = spec.d_model, f"layers.{i}."
    shapes: list[tuple[str, tuple[int, ...]]] = [(p + "input_layernorm.weight", (d,))]
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        shapes.append((f"{p}self_attn.{proj}.weight", (d, d)))
    shapes.append((p + "post_attention_layernorm.weight", (d,)))
    if spec.moe is None:
        f = spec.ffn_hidden
        shapes += [
            (p + "mlp.gate_proj.weight", (f, d)),
            (p + "mlp.up_proj.weight", (f, d)),
            (p + "mlp.down_proj.weight", (d, f)),
        ]
    else:
        shapes += [(p + name, shape) for name, shape in expert_shapes(spec)]
    return shapes


def param_shapes(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's name and shape, in the canonical order."""
    shapes: list[tuple[str, tuple[int, ...]]] = [
        ("embed_tokens.weight", (spec.vocab_size, spec.d_model))
    ]
    for i in range(spec.num_layers):
        shapes += _block_shapes(spec, i)
    shapes.append(("norm.weight", (spec.d_model,)))
    if not spec.tied_embeddings:
        shapes.append(("lm_head.weight", (spec.vocab_size, spec.d_model)))
    return shapes


def init_params(spec: ModelSpec, seed: int) -> dict[str, Tensor]:
    """Fresh float32 parameters: N(0, init_std), residual outputs scaled by 1/sqrt(2L), norms 1."""
    gen = torch.Generator().manual_seed(seed)
    out_std = spec.init_std / math.sqrt(2 * spec.num_layers)
    params: dict[str, Tensor] = {}
    for name, shape in param_shapes(spec):
        if name.endswith("norm.weight"):
            params[name] = torch.ones(shape)
            continue
        std = out_std if ("o_proj" in name or "down_proj" in name) else spec.init_std
        params[name] = torch.normal(0.0, std, size=shape, generator=gen)
    return params


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_tables(head_dim: int, seq_len: int, theta: float, device: torch.device) -> Tensor:
    """(2, T, D) stacked cos and sin for rotary embeddings (Llama's rotate-half layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    pos = torch.arange(seq_len, device=device).float()
    freqs = torch.outer(pos, inv_freq)  # (T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    return torch.stack((emb.cos(), emb.sin()))


def apply_rope(x: Tensor, rope: Tensor) -> Tensor:
    """Rotate (B, H, T, D) queries or keys by position."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * rope[0] + rotated * rope[1]


def attention(x: Tensor, params: Params, prefix: str, spec: ModelSpec, rope: Tensor) -> Tensor:
    b, t, _ = x.shape  # (B, T, d_model)
    h, hd = spec.num_heads, spec.head_dim

    def heads(name: str) -> Tensor:
        return F.linear(x, params[f"{prefix}{name}.weight"]).view(b, t, h, hd).transpose(1, 2)

    q, k, v = apply_rope(heads("q_proj"), rope), apply_rope(heads("k_proj"), rope), heads("v_proj")
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
    return F.linear(y.transpose(1, 2).reshape(b, t, h * hd), params[f"{prefix}o_proj.weight"])


def swiglu(x: Tensor, gate: Tensor, up: Tensor, down: Tensor) -> Tensor:
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def forward(
    params: Params,
    spec: ModelSpec,
    tokens: Tensor,
    tracer: Tracer | None = None,
    *,
    moe_fn: MoEFn = moe_ffn,
) -> tuple[Tensor, Tensor]:
    """Logits (B, T, V) for token ids (B, T) and the summed MoE balance loss (0 if dense);
    ``moe_fn`` computes the MoE feed-forward (expert parallelism dispatches it)."""
    x = F.embedding(tokens, params["embed_tokens.weight"])  # (B, T, d)
    rope = rope_tables(spec.head_dim, tokens.shape[1], spec.rope_theta, x.device)
    aux = x.new_zeros(())
    for i in range(spec.num_layers):
        p = f"layers.{i}."
        h = rms_norm(x, params[p + "input_layernorm.weight"], spec.norm_eps)
        x = x + attention(h, params, p + "self_attn.", spec, rope)
        h = rms_norm(x, params[p + "post_attention_layernorm.weight"], spec.norm_eps)
        if spec.moe is None:
            mlp = p + "mlp."
            ffn = swiglu(
                h,
                params[mlp + "gate_proj.weight"],
                params[mlp + "up_proj.weight"],
                params[mlp + "down_proj.weight"],
            )
        else:
            ffn, layer_aux = moe_fn(h, params, p + "mlp.", spec.moe)
            aux = aux + layer_aux
        x = x + ffn
        if tracer is not None:
            tracer.record(f"layers.{i}", x)
    x = rms_norm(x, params["norm.weight"], spec.norm_eps)
    head = params["embed_tokens.weight" if spec.tied_embeddings else "lm_head.weight"]
    logits = F.linear(x, head)  # (B, T, V)
    if tracer is not None:
        tracer.record("logits", logits)
    return logits, aux


def loss_fn(
    params: Params,
    spec: ModelSpec,
    batch: Tensor,
    tracer: Tracer | None = None,
    *,
    moe_fn: MoEFn = moe_ffn,
) -> Tensor:
    """Mean next-token cross-entropy of a (B, L) batch (inputs [:-1], targets [1:]) + MoE aux."""
    logits, aux = forward(params, spec, batch[:, :-1], tracer, moe_fn=moe_fn)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
    if spec.moe is None:
        return ce
    return ce + spec.moe.aux_loss_coef * aux
