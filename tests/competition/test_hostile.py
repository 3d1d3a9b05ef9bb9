"""Hostile submissions: the strict safetensors reader and the pre-compute checks.

Every header here is written byte by byte (no library would write them); each must
be a :class:`SubmissionError` naming the rule, never another exception. (The limited
scoring process that runs what passed: tests/evaluator/test_sandbox.py.)
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.competition.checks import check_directory
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError
from hypertrain.competition.tensors import read_header
from tests.competition import models
from tests.competition.models import Trained


def _write(path: Path, header: bytes | dict[str, Any], data: bytes = b"") -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def _t(dtype: str = "F32", shape: Any = (2,), offsets: Any = (0, 8)) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


HOSTILE: list[tuple[str, bytes | dict[str, Any], int, str]] = [
    ("float offsets", {"a": _t(offsets=(0.0, 8.0))}, 8, "data_offsets"),
    ("string offsets", {"a": _t(offsets=("0", "8"))}, 8, "data_offsets"),
    ("bool offsets", {"a": _t(offsets=(False, 8))}, 8, "data_offsets"),
    ("three offsets", {"a": _t(offsets=(0, 4, 8))}, 8, "data_offsets"),
    ("negative offset", {"a": _t(offsets=(-8, 0))}, 8, "data_offsets"),
    ("offset past the end", {"a": _t(offsets=(0, 1 << 40))}, 8, "offsets"),
    ("float dimension", {"a": _t(shape=(2.0,))}, 8, "shape"),
    ("huge shape", {"a": _t(shape=(1 << 31, 1 << 31))}, 8, "offsets"),
    ("rank too high", {"a": _t(shape=(1,) * 9, offsets=(0, 4))}, 4, "shape"),
    ("unknown dtype", {"a": _t(dtype="F64")}, 8, "dtype"),
    ("extra key", {"a": {**_t(), "evil": 1}}, 8, "exactly"),
    ("entry not an object", {"a": [1, 2]}, 8, "exactly"),
    ("overlap", {"a": _t(offsets=(0, 8)), "b": _t(offsets=(4, 12))}, 12, "overlap"),
    ("gap", {"a": _t(offsets=(0, 8)), "b": _t(offsets=(12, 20))}, 20, "belong to none"),
    ("data not covered", {"a": _t()}, 16, "cover"),
    ("bad metadata", {"__metadata__": {"k": 1}, "a": _t()}, 8, "__metadata__"),
    ("not an object", b"[1, 2, 3]", 0, "JSON object"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, 0, "not valid JSON"),
    ("duplicate keys", b'{"a": 1, "a": 2}', 0, "not valid JSON"),
    ("not UTF-8", b'{"\xff": 1}', 0, "not valid JSON"),
    ("huge integer", b'{"a": {"dtype": "F32", "shape": [1e400]}}', 0, "not valid JSON"),
]


@pytest.mark.parametrize(("header", "data_bytes", "match"), [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])  # fmt: skip
def test_a_hostile_header_is_a_refusal(
    tmp_path: Path, header: bytes | dict[str, Any], data_bytes: int, match: str
) -> None:
    path = _write(tmp_path / "model.safetensors", header, b"\x00" * data_bytes)
    with pytest.raises(SubmissionError, match=match):
        read_header(path)


@pytest.mark.parametrize("length", [0, 1, 1 << 40, (1 << 64) - 1])
def test_a_header_length_out_of_bounds_is_a_refusal(tmp_path: Path, length: int) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", length) + b"{}" + b"\x00" * 64)
    with pytest.raises(SubmissionError, match="header length"):
        read_header(path)


def test_a_well_formed_header_is_read(tmp_path: Path) -> None:
    header = {"__metadata__": {"format": "pt"}, "b": _t(offsets=(8, 16)), "a": _t()}
    found = read_header(_write(tmp_path / "m.safetensors", header, b"\x00" * 16))
    assert found == {"a": ("F32", (2,)), "b": ("F32", (2,))}


def _spec(trained: Trained) -> CompetitionSpec:
    return CompetitionSpec.model_validate(models.spec_doc(trained.dataset))


def test_a_tensor_of_the_wrong_shape_is_refused_from_its_header(
    trained: Trained, tmp_path: Path
) -> None:
    from safetensors.torch import save_file

    spec = _spec(trained)
    directory = models.export(trained.weak, trained.spec, tmp_path / "m")
    config = json.loads((directory / "config.json").read_text())
    config["intermediate_size"] += 1  # the checkpoint's MLP no longer matches its config
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(SubmissionError, match="shape"):
        check_directory(directory, spec.architecture, spec.data.seq_len)
    save_file({"x": torch.zeros(2000)}, str(directory / "model.safetensors"))
    with pytest.raises(SubmissionError, match="missing"):
        check_directory(directory, spec.architecture, spec.data.seq_len)
