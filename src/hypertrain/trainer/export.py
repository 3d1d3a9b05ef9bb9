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
