"""Export trained parameters as a Hugging Face ``LlamaForCausalLM`` directory.

The dense decoder is architecturally a Llama model (pre-norm RMSNorm, rotate-half
RoPE, SwiGLU, no biases), and parameter names already match Llama's after a
``model.`` prefix, so export is a rename plus a ``config.json``. The head is tied, so
only the embedding is written and ``tie_word_embeddings`` is true. Users then load the
result with ``LlamaForCausalLM.from_pretrained(dir)``, no Hypertrain code needed.
MoE models have no Llama equivalent and are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.model import param_shapes


def llama_config(spec: ModelSpec) -> dict[str, Any]:
    """The ``config.json`` content of the equivalent Llama model."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.d_model,
        "intermediate_size": spec.ffn_hidden,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_heads,
        "head_dim": spec.head_dim,
        "max_position_embeddings": spec.context_length,
        "rms_norm_eps": spec.norm_eps,
        "rope_theta": spec.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.rope_theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": spec.tied_embeddings,
        "initializer_range": spec.init_std,
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def llama_state_dict(params: Mapping[str, Tensor], spec: ModelSpec) -> dict[str, Tensor]:
    """Parameters under Llama's names (``model.`` prefix; ``lm_head`` only if untied)."""
    if spec.moe is not None:
        raise TrainerError("only dense models can be exported as Llama (this one is MoE)")
    out: dict[str, Tensor] = {}
    for name, _ in param_shapes(spec):
        key = name if name == "lm_head.weight" else f"model.{name}"
        out[key] = params[name].detach().cpu().to(torch.float32).contiguous()
    return out


def export_llama(params: Mapping[str, Tensor], spec: ModelSpec, out_dir: Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` into ``out_dir``; return the directory."""
    tensors = llama_state_dict(params, spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(llama_config(spec), indent=2) + "\n")
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return out_dir


def export_tokenizer(tokenizer_json: Path, spec: ModelSpec, out_dir: Path) -> Path:
    """Copy the run's ``tokenizer.json`` next to the model, with a ``tokenizer_config.json``.

    ``transformers.AutoTokenizer.from_pretrained(out_dir)`` then loads it as a fast
    tokenizer whose end-of-sequence token is the dataset's end-of-document token, so
    the exported directory can generate text on its own.
    """
    from hypertrain.data.tokenizer import EOD_TOKEN

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOD_TOKEN,
        "bos_token": None,
        "model_max_length": spec.context_length,
        "clean_up_tokenization_spaces": False,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out_dir


def spec_from_llama_config(config: Mapping[str, Any]) -> ModelSpec:
    """The dense :class:`ModelSpec` equivalent to a Llama ``config.json`` (the inverse map).

    Only configurations this decoder reproduces exactly are accepted: tied embeddings,
    no biases, SiLU, as many key/value heads as heads, default RoPE.
    """
    wanted = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
    for key, value in wanted.items():
        if config.get(key, value) != value:
            raise TrainerError(f"config.json {key}={config.get(key)!r} has no equivalent here")
    heads = config["num_attention_heads"]
    if config.get("num_key_value_heads", heads) != heads:
        raise TrainerError("grouped-query attention has no equivalent here")
    if not config.get("tie_word_embeddings", False):
        raise TrainerError("only models with tied embeddings can be imported")
    try:
        return ModelSpec(
            vocab_size=config["vocab_size"],
            d_model=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            num_heads=heads,
            head_dim=config.get("head_dim", config["hidden_size"] // heads),
            ffn_hidden=config["intermediate_size"],
            context_length=config["max_position_embeddings"],
            rope_theta=config.get("rope_theta", 10000.0),
            norm_eps=config.get("rms_norm_eps", 1e-5),
            init_std=config.get("initializer_range", 0.02),
        )
    except (KeyError, ValueError) as exc:
        raise TrainerError(f"config.json does not describe a supported model: {exc}") from None


def import_llama(directory: Path) -> tuple[dict[str, Tensor], ModelSpec]:
    """Parameters (canonical names, float32) and spec of an exported-style Llama directory."""
    from safetensors.torch import load_file

    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    spec = spec_from_llama_config(config)
    loaded: dict[str, Tensor] = {}
    for path in sorted(directory.glob("*.safetensors")):
        loaded.update(load_file(str(path)))
    params: dict[str, Tensor] = {}
    for name, shape in param_shapes(spec):
        key = name if name == "lm_head.weight" else f"model.{name}"
        tensor = loaded.pop(key, None)
        if tensor is None or tuple(tensor.shape) != shape:
            raise TrainerError(f"{key}: missing or not of shape {shape}")
        params[name] = tensor.to(torch.float32).contiguous()
    if loaded:
        raise TrainerError(f"tensors with no place in the model: {sorted(loaded)[:3]}")
    return params, spec
