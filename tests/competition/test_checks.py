"""Pre-compute checks of a model directory, and the evaluator's deterministic page losses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import save_file

from hypertrain.competition.checks import check_directory
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError, list_directory, model_hash
from hypertrain.evaluator.scorer import load_model, open_dataset, page_batch, page_losses
from hypertrain.trainer.export import llama_config
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


def test_a_missing_tensor_is_refused_before_scoring(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained)
    params = dict(trained.weak)
    params.pop("layers.1.mlp.up_proj.weight")
    directory = tmp_path / "partial"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(llama_config(trained.spec)))
    tensors = {f"model.{k}": v.contiguous() for k, v in params.items()}
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(SubmissionError, match="do not match"):
        load_model(directory, spec)


def test_model_hash_ignores_listing_order(trained: Trained, tmp_path: Path) -> None:
    files = list_directory(_exported(trained, tmp_path))
    assert model_hash(files) == model_hash(files[::-1])


_SCRIPT = """
import sys
from pathlib import Path
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator.scorer import load_model, open_dataset, page_batch, page_losses, prepare
spec = CompetitionSpec.model_validate_json(Path(sys.argv[1]).read_text())
prepare(spec, 1)
ds = open_dataset(spec, Path(sys.argv[2]))
model, _ = load_model(Path(sys.argv[3]), spec)
print(encode_losses(page_losses(model, page_batch(ds, list(range(12))), spec.data.batch_pages)))
"""


def test_two_evaluator_processes_give_identical_score_bytes(
    trained: Trained, tmp_path: Path
) -> None:
    spec = _spec(trained)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    directory = _exported(trained, tmp_path)
    dataset_dir = trained.dataset_dir
    outs = [
        subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(spec_file), str(dataset_dir), str(directory)],
            capture_output=True, text=True, check=True, timeout=300,
        ).stdout.strip()
        for _ in range(2)
    ]  # fmt: skip
    assert outs[0] == outs[1] and len(outs[0]) == 12 * 8
    open_dataset(spec, dataset_dir)  # the dataset matches the spec it was pinned in
    assert encode_losses([1.0]) == "0000803f"
