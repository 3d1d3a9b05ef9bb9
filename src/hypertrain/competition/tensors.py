"""A strict reader of safetensors headers, and the tensor shapes a Llama config implies.

A submission's safetensors header is hostile input: it is parsed here before any
library sees the file. The header length is bounded (and must fit the file), the
JSON goes through the project's strict parser (no duplicate keys, bounded nesting
and size, integers in the safe range), every entry has exactly ``dtype``, ``shape``
and ``data_offsets``, the dtype is one of the known ones, shape dimensions and
offsets are plain non-negative integers (never floats, strings or booleans), each
span is exactly ``prod(shape) x width`` bytes, and the spans tile the data region
from 0 to its end without overlap or gap (as the format requires). Anything else
is a :class:`SubmissionError` naming the rule.

:func:`expected_shapes` turns a checked ``config.json`` into the exact tensor names
and shapes ``LlamaForCausalLM`` holds, so a checkpoint whose tensors differ is
refused from its header, before it is loaded.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Final

from hypertrain.competition.submission import SubmissionError
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import CanonicalJSONError

MAX_HEADER_BYTES: Final = 16 << 20
MAX_TENSORS: Final = 100_000
MAX_RANK: Final = 8
MAX_NAME: Final = 256
DTYPE_BYTES: Final = {"F32": 4, "BF16": 2, "F16": 2}
_ENTRY_KEYS: Final = frozenset({"dtype", "shape", "data_offsets"})


def _uint(value: Any) -> bool:
    return type(value) is int and value >= 0


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``tensor name -> (dtype, shape)`` of one safetensors file, every rule checked."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        prefix = fh.read(8)
        if len(prefix) != 8:
            raise SubmissionError(f"{path.name} is too short to be safetensors")
        length = int.from_bytes(prefix, "little")
        if length < 2 or length > min(MAX_HEADER_BYTES, size - 8):
            raise SubmissionError(f"{path.name}: header length {length} is out of bounds")
        raw = fh.read(length)
    try:
        header = parse_json(raw, max_bytes=MAX_HEADER_BYTES)
    except CanonicalJSONError as exc:
        raise SubmissionError(f"{path.name}: the header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SubmissionError(f"{path.name}: the header must be a JSON object")
    _check_metadata(path.name, header.pop("__metadata__", {}))
    if len(header) > MAX_TENSORS:
        raise SubmissionError(f"{path.name}: more than {MAX_TENSORS} tensors")
    return _check_entries(path.name, header, size - 8 - length)


def _check_metadata(name: str, metadata: Any) -> None:
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise SubmissionError(f"{name}: __metadata__ must map strings to strings")


def _check_entries(
    name: str, header: dict[str, Any], data_bytes: int
) -> dict[str, tuple[str, tuple[int, ...]]]:
    spans: list[tuple[int, int, str]] = []
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for tensor, info in header.items():
        dtype, shape, begin, end = _entry(name, tensor, info)
        if not begin <= end <= data_bytes or end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise SubmissionError(f"{name}: tensor {tensor!r} has inconsistent offsets")
        spans.append((begin, end, tensor))
        out[tensor] = (dtype, shape)
    spans.sort()
    for a, b in itertools.pairwise(spans):
        if a[1] > b[0]:
            raise SubmissionError(f"{name}: tensors {a[2]!r} and {b[2]!r} overlap")
        if a[1] < b[0]:
            raise SubmissionError(f"{name}: bytes between {a[2]!r} and {b[2]!r} belong to none")
    if (spans[0][0] if spans else 0) != 0 or (spans[-1][1] if spans else 0) != data_bytes:
        raise SubmissionError(f"{name}: the tensors do not cover the data region exactly")
    return out


def _entry(name: str, tensor: str, info: Any) -> tuple[str, tuple[int, ...], int, int]:
    where = f"{name}: tensor {tensor[:MAX_NAME]!r}"
    if not tensor or len(tensor) > MAX_NAME:
        raise SubmissionError(f"{where}: the name must be 1 to {MAX_NAME} characters")
    if not isinstance(info, dict) or set(info) != _ENTRY_KEYS:
        raise SubmissionError(f"{where} must have exactly dtype, shape and data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise SubmissionError(f"{where}: dtype {str(dtype)[:16]!r} is not a known dtype")
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(map(_uint, shape)):
        raise SubmissionError(f"{where}: the shape must be at most {MAX_RANK} integers >= 0")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_uint, offsets)):
        raise SubmissionError(f"{where}: data_offsets must be two integers >= 0")
    return dtype, tuple(shape), offsets[0], offsets[1]


def _int_field(config: dict[str, Any], key: str, low: int = 1, high: int = 1 << 20) -> int:
    value = config.get(key)
    if type(value) is not int or not low <= value <= high:
        raise SubmissionError(f"config.json: {key} must be an integer in [{low}, {high}]")
    return value


def expected_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The tensor names and shapes of ``LlamaForCausalLM`` for a (family-checked) config."""
    vocab, hidden = _int_field(config, "vocab_size"), _int_field(config, "hidden_size")
    ffn, layers = (
        _int_field(config, "intermediate_size"),
        _int_field(config, "num_hidden_layers", high=1024),
    )
    heads = _int_field(config, "num_attention_heads", high=4096)
    kv = config.get("num_key_value_heads", heads)
    if type(kv) is not int or kv < 1 or heads % kv:
        raise SubmissionError("config.json: num_key_value_heads must divide num_attention_heads")
    head_dim = config.get("head_dim", hidden // heads)
    if type(head_dim) is not int or head_dim < 1:
        raise SubmissionError("config.json: head_dim must be a positive integer")
    tied = config.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise SubmissionError("config.json: tie_word_embeddings must be true or false")
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab, hidden),
        "model.norm.weight": (hidden,),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": (kv * head_dim, hidden),
            p + "self_attn.v_proj.weight": (kv * head_dim, hidden),
            p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": (ffn, hidden),
            p + "mlp.up_proj.weight": (ffn, hidden),
            p + "mlp.down_proj.weight": (hidden, ffn),
            p + "input_layernorm.weight": (hidden,),
            p + "post_attention_layernorm.weight": (hidden,),
        }
    if not tied:
        shapes["lm_head.weight"] = (vocab, hidden)
    return shapes


def check_shapes(found: dict[str, tuple[int, ...]], config: dict[str, Any]) -> None:
    """Refuse a checkpoint whose tensors are not exactly those the config implies."""
    expected = expected_shapes(config)
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        raise SubmissionError(
            f"the tensors do not match the architecture: missing {missing[:5]}, extra {extra[:5]}"
        )
    for tensor, shape in expected.items():
        if found[tensor] != shape:
            raise SubmissionError(
                f"tensor {tensor!r} has shape {list(found[tensor])}, not {list(shape)}"
            )
