"""Checks a downloaded model directory must pass before an evaluator spends compute.

Only ``config.json`` and safetensors headers are read (never tensor data, never
code): the family and architecture, no ``auto_map`` (remote code), the vocabulary
the spec pins, the context length, each tensor's dtype, the parameter count from
the headers and the total size. Each refusal is a :class:`SubmissionError` naming
the rule, so a miner can run the same checks before uploading.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hypertrain.competition.spec import ArchitectureLimits
from hypertrain.competition.submission import CONFIG_NAME, SubmissionError
from hypertrain.competition.tensors import check_shapes, read_header
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import CanonicalJSONError

MAX_CONFIG_BYTES: Final = 64 << 10
ARCHITECTURES: Final = {"llama": "LlamaForCausalLM"}
_CODE_KEYS: Final = ("auto_map", "trust_remote_code", "custom_pipelines")


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """What the checks learned: parameter count, bytes, context length."""

    num_params: int
    total_bytes: int
    context_length: int
    config: dict[str, Any]


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_NAME
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise SubmissionError(f"config.json is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        config = parse_json(path.read_bytes(), max_bytes=MAX_CONFIG_BYTES)
    except CanonicalJSONError as exc:
        raise SubmissionError(f"config.json is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SubmissionError("config.json must hold a JSON object")
    return config


def check_config(config: dict[str, Any], limits: ArchitectureLimits, seq_len: int) -> int:
    """Refuse remote code and out-of-spec shapes; returns the context length."""
    for key in _CODE_KEYS:
        if key in config:
            raise SubmissionError(f"config.json asks for remote code ({key!r}); refused")
    if config.get("model_type") != limits.model_type:
        raise SubmissionError(
            f"model_type is {config.get('model_type')!r}, the competition takes"
            f" {limits.model_type!r}"
        )
    if config.get("architectures") != [ARCHITECTURES[limits.model_type]]:
        raise SubmissionError(f"architectures must be [{ARCHITECTURES[limits.model_type]!r}]")
    if config.get("vocab_size") != limits.vocab_size:
        raise SubmissionError(
            f"vocab_size is {config.get('vocab_size')!r}, the pinned tokenizer has"
            f" {limits.vocab_size}"
        )
    context = config.get("max_position_embeddings")
    if not isinstance(context, int) or not seq_len <= context <= limits.max_context_length:
        raise SubmissionError(
            f"max_position_embeddings is {context!r}; it must lie in"
            f" [{seq_len}, {limits.max_context_length}]"
        )
    return context


def check_directory(directory: Path, limits: ArchitectureLimits, seq_len: int) -> ModelSummary:
    """Every pre-compute check over a local model directory; returns its summary."""
    config = read_config(directory)
    context = check_config(config, limits, seq_len)
    num_params, total = 0, 0
    shapes: dict[str, tuple[int, ...]] = {}
    for path in sorted(directory.glob("*.safetensors")):
        total += path.stat().st_size
        for tensor, (dtype, shape) in read_header(path).items():
            if dtype not in limits.dtypes:
                raise SubmissionError(
                    f"{tensor}: dtype {dtype} is not allowed ({', '.join(limits.dtypes)})"
                )
            if tensor in shapes:
                raise SubmissionError(f"tensor {tensor!r} appears in two files")
            shapes[tensor] = shape
            num_params += math.prod(shape)
    total += (directory / CONFIG_NAME).stat().st_size
    if total > limits.max_bytes:
        raise SubmissionError(f"the model is {total} bytes, the limit is {limits.max_bytes}")
    if not limits.min_params <= num_params <= limits.max_params:
        raise SubmissionError(
            f"the model has {num_params} parameters; the competition takes"
            f" {limits.min_params} to {limits.max_params}"
        )
    check_shapes(shapes, config)
    return ModelSummary(num_params, total, context, config)
