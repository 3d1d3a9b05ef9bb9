"""Pre-compute checks of a model directory: an exported model passes and loads, one out of
the spec is refused naming the rule (the evaluator's page losses: tests/evaluator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.competition.checks import check_directory
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError, list_directory, model_hash
from hypertrain.evaluator.scorer import load_model, page_batch, page_losses
from tests.competition import models
from tests.competition.models import Trained


def _spec(trained: Trained, **arch: int) -> CompetitionSpec:
    doc = models.spec_doc(trained.dataset)
    doc["architecture"].update(arch)
    return CompetitionSpec.model_validate(doc)


def _exported(trained: Trained, tmp_path: Path) -> Path:
    return models.export(trained.weak, trained.spec, tmp_path / "model")


def test_an_exported_model_passes_and_loads(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained)
    directory = _exported(trained, tmp_path)
    summary = check_directory(directory, spec.architecture, spec.data.seq_len)
    assert summary.num_params > 1000
    model, _ = load_model(directory, spec)
    batch = page_batch(trained.dataset, [0, 1, 2])
    losses = page_losses(model, batch, 2)
    assert len(losses) == 3 and all(0 < v < 20 for v in losses)


def test_too_many_parameters_is_refused(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained, max_params=2_000)
    with pytest.raises(SubmissionError, match="parameters"):
        check_directory(_exported(trained, tmp_path), spec.architecture, spec.data.seq_len)


def test_too_many_bytes_is_refused(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained, max_bytes=10_000)
    with pytest.raises(SubmissionError, match="bytes"):
        check_directory(_exported(trained, tmp_path), spec.architecture, spec.data.seq_len)


def _edit_config(directory: Path, **changes: object) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"vocab_size": 999}, "vocab_size"),
        ({"auto_map": {"AutoModelForCausalLM": "evil.Model"}}, "remote code"),
        ({"model_type": "gpt2"}, "model_type"),
        ({"architectures": ["EvilForCausalLM"]}, "architectures"),
        ({"max_position_embeddings": 100_000}, "max_position_embeddings"),
    ],
)
def test_config_out_of_spec_is_refused(
    trained: Trained, tmp_path: Path, changes: dict[str, object], match: str
) -> None:
    spec = _spec(trained)
    directory = _exported(trained, tmp_path)
    _edit_config(directory, **changes)
    with pytest.raises(SubmissionError, match=match):
        check_directory(directory, spec.architecture, spec.data.seq_len)


def test_a_file_that_is_not_safetensors_is_refused(trained: Trained, tmp_path: Path) -> None:
    directory = _exported(trained, tmp_path)
    (directory / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(SubmissionError, match="only config"):
        list_directory(directory)


def test_a_bad_safetensors_header_is_refused(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained)
    directory = _exported(trained, tmp_path)
    (directory / "model.safetensors").write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(SubmissionError, match="header length"):
        check_directory(directory, spec.architecture, spec.data.seq_len)


def test_model_hash_ignores_listing_order(trained: Trained, tmp_path: Path) -> None:
    files = list_directory(_exported(trained, tmp_path))
    assert model_hash(files) == model_hash(files[::-1])
